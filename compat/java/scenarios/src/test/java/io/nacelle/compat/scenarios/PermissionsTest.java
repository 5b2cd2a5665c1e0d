package io.nacelle.compat.scenarios;

import static io.nacelle.compat.scenarios.Clients.GROUP;
import static io.nacelle.compat.scenarios.Clients.WAIT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.alibaba.nacos.api.PropertyKeyConst;
import com.alibaba.nacos.api.config.ConfigService;
import com.alibaba.nacos.api.exception.NacosException;
import io.nacelle.compat.harness.Await;
import io.nacelle.compat.harness.NacelleLogOnFailure;
import io.nacelle.compat.harness.NacelleServer;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Non-admin users with Nacos permissions (resource {@code <namespace>:<group>:config/<dataId>},
 * the public namespace as an empty id): a reader of the public namespace and a writer of
 * namespace {@code dev}, set up over the 2.x admin API, used by real clients.
 */
@ExtendWith(NacelleLogOnFailure.class)
class PermissionsTest {
  static final String NS = "dev";
  static NacelleServer server;

  @BeforeAll
  static void start() {
    server = NacelleServer.builder().name("perms").auth(true).start();
    server.createNamespace(NS, "Development");
    user("reader", "Reader-Pass-123", "readers", ":*:*", "r");
    user("writer", "Writer-Pass-456", "dev-writers", NS + ":*:*", "rw");
  }

  @AfterAll
  static void stop() {
    if (server != null) {
      server.close();
    }
  }

  private static void user(String name, String password, String role, String resource, String action) {
    post("/nacos/v1/auth/users", Map.of("username", name, "password", password));
    post("/nacos/v1/auth/roles", Map.of("role", role, "username", name));
    post("/nacos/v1/auth/permissions", Map.of("role", role, "resource", resource, "action", action));
  }

  private static void post(String path, Map<String, String> form) {
    var r = server.http("POST", path, Map.of(), new LinkedHashMap<>(form), Map.of());
    assertEquals(200, r.status(), path + " " + form + ": " + r.body());
  }

  private static ConfigService client(String user, String password, String namespace) throws NacosException {
    Properties p = Clients.props(server);
    p.setProperty(PropertyKeyConst.USERNAME, user);
    p.setProperty(PropertyKeyConst.PASSWORD, password);
    if (namespace != null) {
      p.setProperty(PropertyKeyConst.NAMESPACE, namespace);
    }
    return Clients.config(p);
  }

  @Test
  void readerReadsAndListensButCannotWrite() throws Exception {
    String id = Clients.uniq("readable") + ".yaml";
    server.publish(id, GROUP, "r: 1");
    ConfigService reader = client("reader", "Reader-Pass-123", null);
    ConfigService readerInDev = client("reader", "Reader-Pass-123", NS);
    try {
      Clients.Recorder rec = new Clients.Recorder();
      assertEquals("r: 1", reader.getConfigAndSignListener(id, GROUP, 5000, rec));
      server.publish(id, GROUP, "r: 2");
      Await.until(WAIT, "the reader's listener gets the change (got " + rec.contents() + ")", () -> rec.received("r: 2"));
      assertFalse(reader.publishConfig(id, GROUP, "r: hacked"), "no write permission");
      assertEquals("r: 2", server.get(id, GROUP));

      server.publish(NS, id, GROUP, "in dev", Map.of(), Map.of());
      NacosException e = assertThrows(NacosException.class, () -> readerInDev.getConfig(id, GROUP, 5000), "no permission in dev");
      assertEquals(NacosException.NO_RIGHT, e.getErrCode());
    } finally {
      Clients.shutdown(reader);
      Clients.shutdown(readerInDev);
    }
  }

  @Test
  void namespaceWriterStaysInItsNamespace() throws Exception {
    String id = Clients.uniq("writable") + ".properties";
    ConfigService writer = client("writer", "Writer-Pass-456", NS);
    ConfigService writerInPublic = client("writer", "Writer-Pass-456", null);
    try {
      assertTrue(writer.publishConfig(id, GROUP, "w=1"), "rw in dev");
      assertEquals("w=1", writer.getConfig(id, GROUP, 5000));
      assertEquals("w=1", server.get(NS, id, GROUP));
      assertTrue(writer.removeConfig(id, GROUP));

      server.publish(id, GROUP, "public=1");
      assertFalse(writerInPublic.publishConfig(id, GROUP, "public=2"), "no permission in public");
      NacosException e = assertThrows(NacosException.class, () -> writerInPublic.getConfig(id, GROUP, 5000));
      assertEquals(NacosException.NO_RIGHT, e.getErrCode());
      assertEquals("public=1", server.get(id, GROUP));
    } finally {
      Clients.shutdown(writer);
      Clients.shutdown(writerInPublic);
    }
  }
}
