//! `ConfigPublishRequest` → `ConfigPublishResponse`. Every `additionMap` field Nacos reads is
//! carried over; an empty string means the field was not given.

use std::collections::HashMap;

use nacelle_core::{Caller, ConfigMeta, CoreError, Variant};
use nacelle_proto::config::ConfigPublishRequest;
use nacelle_proto::response::ConfigPublishResponse;
use nacelle_proto::{Payload, ResponseHead};
use nacelle_service::PublishRequest;

use crate::ctx::Ctx;
use crate::errors::fail_head;
use crate::wire::{self, key_of, non_blank, RequestMeta};

pub(super) async fn handle(
    ctx: &Ctx,
    caller: &Caller,
    _meta: &RequestMeta,
    req: ConfigPublishRequest,
) -> Payload {
    let request_id = req.request_id.clone();
    let result = match to_service_request(req) {
        Ok(r) => ctx.service.publish(caller, r).await.map(|_| ()),
        Err(e) => Err(e),
    };
    let head = match result {
        Ok(()) => ResponseHead::ok(request_id),
        Err(e) => fail_head(&e, request_id),
    };
    wire::message(&ConfigPublishResponse { head })
}

fn to_service_request(req: ConfigPublishRequest) -> Result<PublishRequest, CoreError> {
    let key = key_of(
        req.tenant.as_deref(),
        req.group.as_deref(),
        req.data_id.as_deref(),
    )?;
    let add: HashMap<String, Option<String>> = req.addition_map.unwrap_or_default();
    let get = |name: &str| -> Option<&str> { non_blank(add.get(name).and_then(|v| v.as_deref())) };
    let owned = |name: &str| get(name).unwrap_or("").to_string();
    let variant = Variant::from_wire_ext(
        get("betaIps"),
        get("tag"),
        get("grayName"),
        get("grayRule"),
        get("grayPriority"),
    )?;
    Ok(PublishRequest {
        key,
        content: req.content.unwrap_or_default(),
        config_type: get("type").map(str::to_string),
        meta: ConfigMeta {
            app_name: owned("appName"),
            desc: owned("desc"),
            r#use: owned("use"),
            effect: owned("effect"),
            schema: owned("schema"),
            config_tags: owned("config_tags"),
            encrypted_data_key: owned("encryptedDataKey"),
        },
        src_user: owned("src_user"),
        cas_md5: non_blank(req.cas_md5.as_deref()).map(str::to_string),
        variant,
        // Nacelle's publish message, in `additionMap` as Nacos carries its extra fields.
        message: owned("message"),
        change_id: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addition_map_fields_and_empty_strings() {
        let req: ConfigPublishRequest = wire::from_json(
            br#"{"dataId":"d","group":"G","tenant":"","content":"x","casMd5":"",
                "additionMap":{"type":"yaml","appName":"app","desc":"","src_user":"u",
                "config_tags":"a,b","use":"u1","effect":"e","schema":"s",
                "encryptedDataKey":"","betaIps":"","tag":""}}"#,
        )
        .expect("parses");
        let r = to_service_request(req).expect("valid");
        assert_eq!(r.variant, Variant::Formal);
        assert_eq!(r.cas_md5, None);
        assert_eq!(r.config_type.as_deref(), Some("yaml"));
        assert_eq!(r.meta.app_name, "app");
        assert_eq!(r.meta.desc, "");
        assert_eq!(r.meta.config_tags, "a,b");
        assert_eq!(r.meta.r#use, "u1");
        assert_eq!(r.src_user, "u");

        let req: ConfigPublishRequest = wire::from_json(
            br#"{"dataId":"d","group":"G","content":"x","casMd5":"abc",
                "additionMap":{"betaIps":"1.1.1.1, 2.2.2.2"}}"#,
        )
        .expect("parses");
        let r = to_service_request(req).expect("valid");
        assert_eq!(r.cas_md5.as_deref(), Some("abc"));
        assert_eq!(
            r.variant,
            Variant::Gray(nacelle_core::GraySpec::beta("1.1.1.1,2.2.2.2").expect("valid"))
        );

        let req: ConfigPublishRequest = wire::from_json(
            br#"{"dataId":"d","group":"G","content":"x",
                "additionMap":{"grayName":"shop","grayRule":"AppName=shop","grayPriority":"7"}}"#,
        )
        .expect("parses");
        let r = to_service_request(req).expect("valid");
        assert_eq!(
            r.variant,
            Variant::Gray(
                nacelle_core::GraySpec::labels("shop", "AppName=shop", Some(7)).expect("valid")
            )
        );
    }
}
