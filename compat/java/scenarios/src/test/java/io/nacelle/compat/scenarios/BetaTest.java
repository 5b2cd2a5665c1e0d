package io.nacelle.compat.scenarios;

import static io.nacelle.compat.scenarios.Clients.GROUP;
import static io.nacelle.compat.scenarios.Clients.WAIT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import com.alibaba.nacos.api.config.ConfigService;
import io.nacelle.compat.harness.Await;
import io.nacelle.compat.harness.NacelleLogOnFailure;
import io.nacelle.compat.harness.NacelleServer;
import io.nacelle.compat.harness.SourceAddressRelay;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Beta (gray by IP). Nacelle takes the client IP from the socket. Client A connects directly
 * (the server sees 127.0.0.1); client B connects through a plain TCP relay whose upstream
 * connections come from 127.0.0.2 (the Java client cannot pick its source address itself).
 */
@ExtendWith(NacelleLogOnFailure.class)
class BetaTest {
  static NacelleServer server;
  static SourceAddressRelay relay;
  static ConfigService a;
  static ConfigService b;

  @BeforeAll
  static void start() throws Exception {
    server = NacelleServer.builder().name("beta").auth(false).start();
    relay = SourceAddressRelay.start(server, "127.0.0.2");
    a = Clients.config(server);
    b = Clients.config(Clients.props(relay.serverAddr()));
  }

  @AfterAll
  static void stop() {
    Clients.shutdown(a);
    Clients.shutdown(b);
    if (relay != null) {
      relay.close();
    }
    if (server != null) {
      server.close();
    }
  }

  private static void publishBeta(String id, String content, String ips) {
    server.publish("", id, GROUP, content, Map.of(), Map.of("betaIps", ips));
  }

  @Test
  void betaForTheClientsOwnAddress() throws Exception {
    String id = Clients.uniq("beta-lo1") + ".properties";
    server.publish(id, GROUP, "formal=1");
    Clients.Recorder ra = new Clients.Recorder();
    Clients.Recorder rb = new Clients.Recorder();
    assertEquals("formal=1", a.getConfigAndSignListener(id, GROUP, 5000, ra));
    assertEquals("formal=1", b.getConfigAndSignListener(id, GROUP, 5000, rb));

    long t0 = System.nanoTime();
    publishBeta(id, "beta=1", "127.0.0.1");
    Await.until(WAIT, "client A (127.0.0.1) is pushed the beta (got " + ra.contents() + ")", () -> ra.received("beta=1"));
    Clients.reportDelay("beta push", t0, ra.firstNanos("beta=1"));
    assertEquals("beta=1", a.getConfig(id, GROUP, 5000), "A reads the beta");
    assertEquals("formal=1", b.getConfig(id, GROUP, 5000), "B (127.0.0.2) reads the formal config");

    // a formal change: B is told, A keeps its beta
    server.publish(id, GROUP, "formal=2");
    Await.until(WAIT, "client B gets the formal change (got " + rb.contents() + ")", () -> rb.received("formal=2"));
    assertEquals("beta=1", a.getConfig(id, GROUP, 5000), "A still reads the beta");
    assertFalse(rb.contents().contains("beta=1"), "B never saw the beta: " + rb.contents());

    // stopping the beta sends A the formal content again
    var r = server.http("DELETE", "/nacos/v1/cs/configs", Map.of("dataId", id, "group", GROUP, "beta", "true"), Map.of(), Map.of());
    assertEquals(200, r.status(), r.body());
    Await.until(WAIT, "A gets the formal config back after the beta stops (got " + ra.contents() + ")", () -> ra.received("formal=2"));
    assertEquals("formal=2", a.getConfig(id, GROUP, 5000));
  }

  @Test
  void betaForAnotherAddress() throws Exception {
    String id = Clients.uniq("beta-lo2") + ".properties";
    server.publish(id, GROUP, "formal=1");
    Clients.Recorder ra = new Clients.Recorder();
    Clients.Recorder rb = new Clients.Recorder();
    assertEquals("formal=1", a.getConfigAndSignListener(id, GROUP, 5000, ra));
    assertEquals("formal=1", b.getConfigAndSignListener(id, GROUP, 5000, rb));

    publishBeta(id, "beta=2", "127.0.0.2");
    Await.until(WAIT, "client B (127.0.0.2) is pushed the beta (got " + rb.contents() + ")", () -> rb.received("beta=2"));
    assertEquals("beta=2", b.getConfig(id, GROUP, 5000));
    assertEquals("formal=1", a.getConfig(id, GROUP, 5000), "A (127.0.0.1, not listed) reads the formal config");
    assertEquals("formal=1", server.get(id, GROUP), "HTTP from 127.0.0.1 reads the formal config");
    assertFalse(ra.contents().contains("beta=2"), "A never saw the beta: " + ra.contents());
  }
}
