package io.nacelle.compat.maintainer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.alibaba.nacos.maintainer.client.config.ConfigMaintainerService;
import io.nacelle.compat.harness.NacelleServer.HttpResult;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * Authentication as the SDK meets it: it logs in with username/password (POST
 * /nacos/v3/auth/user/login) and sends the token in the {@code accessToken} header. A wrong
 * password or a user without permissions gets 403 for every call and writes nothing.
 */
class AuthTest extends MaintainerTestBase {

  @Test
  void theAdminIsLoggedIn() throws Exception {
    assertEquals("public", maintainer.getNamespaceList().get(0).getNamespace());
  }

  @Test
  void aWrongPasswordIsRefused() throws Exception {
    ConfigMaintainerService wrong = connect(server.username(), server.password() + "-wrong");
    refused(403, "", () -> wrong.getNamespaceList());
    refused(403, "", () -> wrong.publishConfig("intruder.txt", "written"));
    refused(403, "", () -> wrong.createNamespace("intruders", "Intruders", ""));
    refused(404, "Config not exist", () -> maintainer.getConfig("intruder.txt"));
    assertTrue(!maintainer.checkNamespaceIdExist("intruders"));
  }

  @Test
  void aUserWithoutPermissionsIsRefused() throws Exception {
    HttpResult r =
        server.http(
            "POST", "/nacos/v1/auth/users", Map.of(), Map.of("username", "visitor", "password", "visitor-pass"), Map.of());
    assertEquals(200, r.status(), r.body());
    ConfigMaintainerService visitor = connect("visitor", "visitor-pass");
    refused(403, "", () -> visitor.publishConfig("visitor.txt", "written"));
    refused(403, "", () -> visitor.deleteConfig("guarded.txt"));
    refused(403, "", () -> visitor.createNamespace("visitors", "Visitors", ""));
    assertTrue(maintainer.publishConfig("guarded.txt", "kept"));
    refused(403, "", () -> visitor.getConfig("guarded.txt"));
    refused(403, "", () -> visitor.listConfigHistory("guarded.txt", "DEFAULT_GROUP", "public", 1, 10));
    // Listings too: Nacos checks the resource before they run (403, not an empty answer).
    refused(403, "", () -> visitor.getNamespaceList());
    refused(403, "", () -> visitor.checkNamespaceIdExist("public"));
    refused(403, "", () -> visitor.listConfigs("public"));
    refused(403, "", () -> visitor.searchConfigs("guarded", "", "public"));
    refused(403, "", () -> visitor.getConfigListByNamespace("public"));
    refused(403, "", () -> visitor.getListeners("guarded.txt", "DEFAULT_GROUP"));
    refused(403, "", () -> visitor.getAllSubClientConfigByIp("127.0.0.1", true, null, true));
    assertEquals("kept", maintainer.getConfig("guarded.txt").getContent());
    refused(404, "Config not exist", () -> maintainer.getConfig("visitor.txt"));
    assertTrue(!maintainer.checkNamespaceIdExist("visitors"));
    assertTrue(maintainer.deleteConfig("guarded.txt"));
  }

  @Test
  void aReaderOfPublicReadsAndListsButCannotWrite() throws Exception {
    for (Map<String, String> form :
        List.of(
            Map.of("username", "reader", "password", "reader-pass"),
            Map.of("role", "public-reader", "username", "reader"),
            Map.of("role", "public-reader", "resource", "public:*:*", "action", "r"))) {
      String path =
          form.containsKey("password")
              ? "/nacos/v1/auth/users"
              : form.containsKey("resource") ? "/nacos/v1/auth/permissions" : "/nacos/v1/auth/roles";
      HttpResult r = server.http("POST", path, Map.of(), form, Map.of());
      assertEquals(200, r.status(), path + ": " + r.body());
    }
    assertTrue(maintainer.publishConfig("readable.txt", "DEFAULT_GROUP", "public", "open"));
    ConfigMaintainerService reader = connect("reader", "reader-pass");
    assertEquals("open", reader.getConfig("readable.txt").getContent());
    assertEquals(
        List.of("readable.txt"),
        reader.listConfigs("readable.txt", "DEFAULT_GROUP", "public").getPageItems().stream()
            .map(c -> c.getDataId())
            .toList());
    // The namespace API is secured by a fixed resource that no `<ns>:<group>:<type>`
    // permission matches (Nacos 3's NamespaceControllerV3): refused, as by Nacos.
    refused(403, "", () -> reader.getNamespaceList());
    assertEquals(
        "I",
        reader.listConfigHistory("readable.txt", "DEFAULT_GROUP", "public", 1, 10).getPageItems().get(0)
            .getOpType().trim());
    refused(403, "", () -> reader.publishConfig("readable.txt", "changed"));
    assertEquals("open", maintainer.getConfig("readable.txt").getContent());
    assertTrue(maintainer.deleteConfig("readable.txt"));
  }
}
