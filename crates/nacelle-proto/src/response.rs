//! [`ResponseHead`], the fields every response carries, and the responses that carry
//! nothing else.

use serde::{Deserialize, Serialize};

use crate::error_code::{RESULT_FAIL, RESULT_OK};
use crate::{lenient, messages, types};

/// The fields every response carries: `resultCode` (200 ok / 500 fail), `errorCode` (0 when
/// ok), `message`, `requestId` (the request's, echoed) and `success`. `resultCode`,
/// `errorCode` and `success` are always written: the Rust SDK needs the first two, the Go
/// SDK reads `success`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResponseHead {
    /// [`RESULT_OK`] or [`RESULT_FAIL`].
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub result_code: i32,
    /// One of [`crate::error_code`]; 0 when ok.
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub error_code: i32,
    /// Why the request failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The `requestId` of the request answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// `resultCode == 200`, for clients that read this instead.
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub success: bool,
}

impl ResponseHead {
    /// `resultCode 200, errorCode 0, success true`.
    pub fn ok(request_id: Option<String>) -> Self {
        ResponseHead {
            result_code: RESULT_OK,
            error_code: 0,
            message: None,
            request_id,
            success: true,
        }
    }

    /// `resultCode 500, success false` with an error code and message.
    pub fn fail(error_code: i32, message: impl Into<String>, request_id: Option<String>) -> Self {
        ResponseHead {
            result_code: RESULT_FAIL,
            error_code,
            message: Some(message.into()),
            request_id,
            success: false,
        }
    }

    /// Whether the request succeeded (`resultCode 200`).
    pub fn is_ok(&self) -> bool {
        self.result_code == RESULT_OK
    }
}

/// Declares responses that carry only the head; they are written as the head is.
macro_rules! head_only {
    ($($(#[$doc:meta])* $name:ident => $type_name:path;)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name {
            /// The common fields.
            pub head: ResponseHead,
        }

        impl $name {
            /// A successful response to the request `request_id`.
            pub fn ok(request_id: Option<String>) -> Self {
                $name { head: ResponseHead::ok(request_id) }
            }

            /// A failed response.
            pub fn fail(error_code: i32, message: impl Into<String>, request_id: Option<String>) -> Self {
                $name { head: ResponseHead::fail(error_code, message, request_id) }
            }
        }

        impl From<ResponseHead> for $name {
            fn from(head: ResponseHead) -> Self {
                $name { head }
            }
        }

        messages!($name => $type_name);
    )*};
}

head_only! {
    /// `ErrorResponse`: a protocol-level error (server not ready, unregistered connection,
    /// unknown type, unparsable body), always `resultCode 500`.
    ErrorResponse => types::ERROR_RESPONSE;
    /// `HealthCheckResponse`: the answer to the client's keepalive.
    HealthCheckResponse => types::HEALTH_CHECK_RESPONSE;
    /// `ConfigPublishResponse`.
    ConfigPublishResponse => types::CONFIG_PUBLISH_RESPONSE;
    /// `ConfigRemoveResponse` (success also when nothing was stored).
    ConfigRemoveResponse => types::CONFIG_REMOVE_RESPONSE;
    /// `ConfigChangeNotifyResponse`: the ack of a change push (Java, Rust).
    ConfigChangeNotifyResponse => types::CONFIG_CHANGE_NOTIFY_RESPONSE;
    /// `NotifySubscriberResponse`: the ack Python 3.x sends for any server request.
    NotifySubscriberResponse => types::NOTIFY_SUBSCRIBER_RESPONSE;
    /// `ClientDetectionResponse`: the answer to a probe.
    ClientDetectionResponse => types::CLIENT_DETECTION_RESPONSE;
    /// `ConnectResetResponse`: the ack of a reset.
    ConnectResetResponse => types::CONNECT_RESET_RESPONSE;
    /// `ConfigChangeClusterSyncResponse` (member → member).
    ConfigChangeClusterSyncResponse => types::CONFIG_CHANGE_CLUSTER_SYNC_RESPONSE;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_is_written_as_clients_need_it() {
        let json = serde_json::to_string(&HealthCheckResponse::ok(Some("7".into()))).expect("json");
        assert_eq!(
            json,
            r#"{"resultCode":200,"errorCode":0,"requestId":"7","success":true}"#
        );
        let json =
            serde_json::to_string(&ErrorResponse::fail(302, "RequestHandler Not Found", None))
                .expect("json");
        assert_eq!(
            json,
            r#"{"resultCode":500,"errorCode":302,"message":"RequestHandler Not Found","success":false}"#
        );
    }

    #[test]
    fn heads_round_trip_and_read_leniently() {
        for r in [
            ResponseHead::ok(Some("1".into())),
            ResponseHead::fail(403, "no", None),
        ] {
            let json = serde_json::to_vec(&r).expect("json");
            assert_eq!(
                serde_json::from_slice::<ResponseHead>(&json).expect("back"),
                r
            );
        }
        // As Java Nacos writes an ack, nulls and extra fields included.
        let h: ConfigChangeNotifyResponse = serde_json::from_str(
            r#"{"resultCode":200,"errorCode":0,"message":null,"requestId":"42","success":true,"extra":1}"#,
        )
        .expect("parses");
        assert_eq!(h, ConfigChangeNotifyResponse::ok(Some("42".into())));
        let h: ResponseHead =
            serde_json::from_str(r#"{"resultCode":null,"success":null}"#).expect("parses");
        assert_eq!((h.result_code, h.error_code, h.success), (0, 0, false));
    }
}
