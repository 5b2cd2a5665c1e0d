package io.nacelle.compat.scenarios;

import static io.nacelle.compat.scenarios.Clients.GROUP;
import static io.nacelle.compat.scenarios.Clients.WAIT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.alibaba.nacos.api.PropertyKeyConst;
import com.alibaba.nacos.api.config.ConfigService;
import com.alibaba.nacos.api.exception.NacosException;
import io.nacelle.compat.harness.Await;
import io.nacelle.compat.harness.NacelleLogOnFailure;
import io.nacelle.compat.harness.NacelleServer;
import java.util.Properties;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** Authentication on (nacelle's default): username/password properties. */
@ExtendWith(NacelleLogOnFailure.class)
class AuthTest {
  static NacelleServer server;

  @BeforeAll
  static void start() {
    server = NacelleServer.builder().name("auth").auth(true).start();
  }

  @AfterAll
  static void stop() {
    if (server != null) {
      server.close();
    }
  }

  @Test
  void roundTripWithCredentials() throws Exception {
    ConfigService client = Clients.config(server); // username nacos + the admin password
    try {
      String id = Clients.uniq("auth") + ".yaml";
      assertNull(client.getConfig(id, GROUP, 5000));
      assertTrue(client.publishConfig(id, GROUP, "secret: 1"));
      assertEquals("secret: 1", client.getConfig(id, GROUP, 5000));
      assertEquals("secret: 1", server.get(id, GROUP));
      Clients.Recorder rec = new Clients.Recorder();
      client.getConfigAndSignListener(id, GROUP, 5000, rec);
      long t0 = System.nanoTime();
      server.publish(id, GROUP, "secret: 2");
      Await.until(WAIT, "listener gets the change with auth on (got " + rec.contents() + ")", () -> rec.received("secret: 2"));
      Clients.reportDelay("auth on", t0, rec.firstNanos("secret: 2"));
      assertTrue(client.removeConfig(id, GROUP));
      assertNull(server.get(id, GROUP));
    } finally {
      Clients.shutdown(client);
    }
  }

  @Test
  void wrongPasswordIsRefused() throws Exception {
    String id = Clients.uniq("guarded") + ".properties";
    server.publish(id, GROUP, "guarded=true");
    Properties p = Clients.props(server);
    p.setProperty(PropertyKeyConst.PASSWORD, server.password() + "-wrong");
    // Observed with 2.5.1 and 3.2.1: construction succeeds (the failed login is only logged),
    // reads throw NacosException 403, writes answer false; nothing changes on the server.
    ConfigService bad = Clients.config(p);
    try {
      NacosException read = assertThrows(NacosException.class, () -> bad.getConfig(id, GROUP, 5000), "a read is refused");
      System.out.println("[auth] wrong password: getConfig threw errCode=" + read.getErrCode() + " msg=" + read.getErrMsg());
      assertEquals(NacosException.NO_RIGHT, read.getErrCode(), "the client reports 403 (no right)");

      boolean published;
      try {
        published = bad.publishConfig(id, GROUP, "guarded=overwritten");
        System.out.println("[auth] wrong password: publishConfig returned " + published);
      } catch (NacosException e) {
        System.out.println("[auth] wrong password: publishConfig threw errCode=" + e.getErrCode() + " msg=" + e.getErrMsg());
        published = false;
      }
      assertTrue(!published, "a write is refused");
      assertEquals("guarded=true", server.get(id, GROUP), "nothing was written");
      boolean removed;
      try {
        removed = bad.removeConfig(id, GROUP);
        System.out.println("[auth] wrong password: removeConfig returned " + removed);
      } catch (NacosException e) {
        System.out.println("[auth] wrong password: removeConfig threw errCode=" + e.getErrCode());
        removed = false;
      }
      assertTrue(!removed, "a remove is refused");
      assertEquals("guarded=true", server.get(id, GROUP), "nothing was removed");

      // a listener with the wrong password never gets the content
      Clients.Recorder rec = new Clients.Recorder();
      bad.addListener(id, GROUP, rec);
      server.publish(id, GROUP, "guarded=changed");
      ConfigService good = Clients.config(server);
      try {
        Clients.Recorder ok = new Clients.Recorder();
        good.addListener(id, GROUP, ok);
        Await.until(WAIT, "a client with the right password gets it", () -> ok.received("guarded=changed"));
      } finally {
        Clients.shutdown(good);
      }
      assertTrue(rec.contents().isEmpty(), "no content for the wrong password: " + rec.contents());
    } finally {
      Clients.shutdown(bad);
    }
  }
}
