package io.nacelle.compat.scenarios;

import static io.nacelle.compat.scenarios.Clients.GROUP;
import static io.nacelle.compat.scenarios.Clients.WAIT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import com.alibaba.nacos.api.config.ConfigService;
import io.nacelle.compat.harness.Await;
import io.nacelle.compat.harness.NacelleLogOnFailure;
import io.nacelle.compat.harness.NacelleServer;
import io.nacelle.compat.harness.SourceAddressRelay;
import java.net.InetAddress;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Beta (gray by IP), matched as Nacos matches it: against the IP the client reports about
 * itself ({@code clientIp} of its gRPC {@code ConnectionSetupRequest}), not the socket's.
 *
 * <p>The Java client reports {@code NetUtils.localIP()}: the system property {@code
 * com.alibaba.nacos.client.local.ip} when set (the client modules' surefire configuration sets
 * it to 198.51.100.7, an address of no interface here), else its first non-loopback address. It
 * is read once per JVM, so both clients report the same address. Client A connects directly
 * (its socket address is 127.0.0.1); client B through a TCP relay whose upstream connections
 * come from 127.0.0.2.
 */
@ExtendWith(NacelleLogOnFailure.class)
class BetaTest {
  static NacelleServer server;
  static SourceAddressRelay relay;
  static ConfigService a;
  static ConfigService b;
  /** The address both clients report. */
  static String reported;

  @BeforeAll
  static void start() throws Exception {
    server = NacelleServer.builder().name("beta").auth(false).start();
    relay = SourceAddressRelay.start(server, "127.0.0.2");
    a = Clients.config(server);
    b = Clients.config(Clients.props(relay.serverAddr()));
    reported = reportedIp();
    String configured = System.getProperty("com.alibaba.nacos.client.local.ip");
    if (configured != null) {
      assertEquals(configured, reported, "the client reports the address its system property names");
    }
    assertFalse(InetAddress.getByName(reported).isLoopbackAddress(), "the clients report " + reported + ", not a socket address");
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

  /** What nacos-client puts in {@code metadata.clientIp}: {@code NetUtils.localIP()} (2.x) or {@code localIp()} (3.x). */
  static String reportedIp() throws Exception {
    Class<?> netUtils = Class.forName("com.alibaba.nacos.api.utils.NetUtils");
    for (String name : new String[] {"localIP", "localIp"}) {
      try {
        return (String) netUtils.getMethod(name).invoke(null);
      } catch (NoSuchMethodException e) {
        // the other spelling
      }
    }
    throw new AssertionError("no NetUtils.localIP()/localIp() in this nacos-client");
  }

  private static void publishBeta(String id, String content, String ips) {
    server.publish("", id, GROUP, content, Map.of(), Map.of("betaIps", ips));
  }

  private static NacelleServer.HttpResult httpGet(String id, Map<String, String> headers) {
    return server.http("GET", "/nacos/v1/cs/configs", Map.of("dataId", id, "group", GROUP), Map.of(), headers);
  }

  @Test
  void betaForTheReportedIpReachesTheClientWhateverItsSocket() throws Exception {
    String id = Clients.uniq("beta-reported") + ".properties";
    server.publish(id, GROUP, "formal=1");
    Clients.Recorder ra = new Clients.Recorder();
    Clients.Recorder rb = new Clients.Recorder();
    assertEquals("formal=1", a.getConfigAndSignListener(id, GROUP, 5000, ra));
    assertEquals("formal=1", b.getConfigAndSignListener(id, GROUP, 5000, rb));

    long t0 = System.nanoTime();
    publishBeta(id, "beta=1", reported);
    Await.until(WAIT, "client A (reports " + reported + ") is pushed the beta (got " + ra.contents() + ")", () -> ra.received("beta=1"));
    Await.until(WAIT, "client B (from 127.0.0.2, reports " + reported + ") is pushed the beta (got " + rb.contents() + ")", () -> rb.received("beta=1"));
    Clients.reportDelay("beta push (reported IP)", t0, ra.firstNanos("beta=1"));
    assertEquals("beta=1", a.getConfig(id, GROUP, 5000), "A reads the beta");
    assertEquals("beta=1", b.getConfig(id, GROUP, 5000), "B reads the beta");

    // HTTP as Nacos reads it: X-Forwarded-For names the client; without it, the socket.
    NacelleServer.HttpResult forwarded = httpGet(id, Map.of("X-Forwarded-For", reported));
    assertEquals("beta=1", forwarded.body(), "HTTP with X-Forwarded-For: " + reported);
    assertEquals("true", forwarded.header("isBeta"));
    assertEquals("formal=1", httpGet(id, Map.of()).body(), "HTTP from 127.0.0.1, no header, reads the formal config");

    // Stopping the beta sends both the formal content again.
    server.publish(id, GROUP, "formal=2");
    var r = server.http("DELETE", "/nacos/v1/cs/configs", Map.of("dataId", id, "group", GROUP, "beta", "true"), Map.of(), Map.of());
    assertEquals(200, r.status(), r.body());
    Await.until(WAIT, "A gets the formal config after the beta stops (got " + ra.contents() + ")", () -> ra.received("formal=2"));
    Await.until(WAIT, "B gets the formal config after the beta stops (got " + rb.contents() + ")", () -> rb.received("formal=2"));
    assertEquals("formal=2", a.getConfig(id, GROUP, 5000));
  }

  @Test
  void betaForTheSocketAddressesDoesNotReachClientsThatReportAnother() throws Exception {
    String id = Clients.uniq("beta-socket") + ".properties";
    server.publish(id, GROUP, "formal=1");
    Clients.Recorder ra = new Clients.Recorder();
    Clients.Recorder rb = new Clients.Recorder();
    assertEquals("formal=1", a.getConfigAndSignListener(id, GROUP, 5000, ra));
    assertEquals("formal=1", b.getConfigAndSignListener(id, GROUP, 5000, rb));
    assertNotEquals("127.0.0.1", reported);

    publishBeta(id, "beta=2", "127.0.0.1,127.0.0.2");
    // An HTTP reader that reports nothing is matched by its socket address (127.0.0.1).
    NacelleServer.HttpResult plain = httpGet(id, Map.of());
    assertEquals("beta=2", plain.body(), "HTTP from 127.0.0.1 without a forwarded header reads the beta");
    assertEquals("true", plain.header("isBeta"));
    assertEquals("formal=1", a.getConfig(id, GROUP, 5000), "A (socket 127.0.0.1, reports " + reported + ") reads the formal config");
    assertEquals("formal=1", b.getConfig(id, GROUP, 5000), "B (socket 127.0.0.2) reads the formal config");

    // A formal change made after the beta reaches both: they were never told of the beta.
    server.publish(id, GROUP, "formal=2");
    Await.until(WAIT, "A gets the formal change (got " + ra.contents() + ")", () -> ra.received("formal=2"));
    Await.until(WAIT, "B gets the formal change (got " + rb.contents() + ")", () -> rb.received("formal=2"));
    assertFalse(ra.contents().contains("beta=2"), "A never saw the beta: " + ra.contents());
    assertFalse(rb.contents().contains("beta=2"), "B never saw the beta: " + rb.contents());
  }
}
