package io.nacelle.compat.scenarios;

import static io.nacelle.compat.scenarios.Clients.GROUP;
import static org.junit.jupiter.api.Assertions.assertEquals;

import com.alibaba.nacos.api.config.ConfigService;
import io.nacelle.compat.harness.Await;
import io.nacelle.compat.harness.NacelleLogOnFailure;
import io.nacelle.compat.harness.NacelleServer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The server is stopped by SIGTERM and started again 20 times under listening clients; after
 * each restart a change reaches every listener within 2 s, and so does the next one, pushed on
 * the connection the client settled on.
 *
 * <p>Nacelle once sent a {@code ConnectResetRequest} and then ended the stream on shutdown; the
 * Java client took the two as two reconnects, sent its re-listen on the first new connection and
 * dropped it, and in about 3 restarts in 30 a listener stayed deaf until the client's 3-minute
 * full sync. A stopping server now ends the stream only (as Java Nacos's {@code shutdownNow()}),
 * so each client connects exactly once to the new process: the test checks that too, with the
 * server's count of registrations (every one of them still open at the end of the round).
 */
@ExtendWith(NacelleLogOnFailure.class)
class RepeatedRestartTest {
  static final int RESTARTS = 20;
  static final int CLIENTS = 3;
  /** A change made after a restart must reach every listener within this. */
  static final Duration DELIVERED_WITHIN = Duration.ofSeconds(2);

  @Test
  void everyListenerGetsEveryChangeAfterEachRestart() throws Exception {
    try (NacelleServer server = NacelleServer.builder().name("restarts").auth(false).start()) {
      List<ConfigService> clients = new ArrayList<>();
      try {
        String id = Clients.uniq("restarts") + ".properties";
        server.publish(id, GROUP, "gen=0");
        List<Clients.Recorder> recs = new ArrayList<>();
        for (int i = 0; i < CLIENTS; i++) {
          ConfigService c = Clients.config(server);
          clients.add(c);
          Clients.Recorder rec = new Clients.Recorder();
          recs.add(rec);
          assertEquals("gen=0", c.getConfigAndSignListener(id, GROUP, 5000, rec));
        }
        // Every client listens (a change reaches each) before the first restart.
        server.publish(id, GROUP, "gen=0.b");
        awaitAll(recs, "gen=0.b", Clients.WAIT, "before the restarts");
        long connections = metric(server, "nacelle_grpc_connections");
        assertEquals(
            connections, metric(server, "nacelle_grpc_registrations_total"), "one registration per open connection");

        List<Double> afterRestart = new ArrayList<>();
        List<Double> pushed = new ArrayList<>();
        for (int round = 1; round <= RESTARTS; round++) {
          server.stop(); // SIGTERM, waits for the exit
          server.start(); // same ports and data dir; returns once ready

          // Made as soon as the server is ready, usually before the clients are back: they
          // learn of it from the md5 their re-listen carries.
          String first = "gen=" + round + ".a";
          long t0 = System.nanoTime();
          server.publish(id, GROUP, first);
          afterRestart.add(awaitAll(recs, first, DELIVERED_WITHIN, "round " + round + ", first change") - t0 / 1e6);

          // Pushed: only a client listening on the connection it kept gets it.
          String second = "gen=" + round + ".b";
          long t1 = System.nanoTime();
          server.publish(id, GROUP, second);
          pushed.add(awaitAll(recs, second, DELIVERED_WITHIN, "round " + round + ", second change") - t1 / 1e6);

          long registered = metric(server, "nacelle_grpc_registrations_total");
          long open = metric(server, "nacelle_grpc_connections");
          System.out.printf(
              "[restart] nacos-client %s round %d: first change after %.1f ms, pushed change after %.1f ms,"
                  + " registrations %d, open connections %d%n",
              System.getProperty("nacos.client.expected.version", "?"),
              round,
              afterRestart.get(round - 1),
              pushed.get(round - 1),
              registered,
              open);
          assertEquals(connections, open, "round " + round + ": every client is connected again");
          assertEquals(open, registered, "round " + round + ": each client connected once to the new process");
        }
        System.out.printf(
            "[restart] nacos-client %s, %d SIGTERM restarts, %d listeners: change made at readiness delivered"
                + " p50 %.1f ms, max %.1f ms; pushed change p50 %.1f ms, max %.1f ms%n",
            System.getProperty("nacos.client.expected.version", "?"),
            RESTARTS,
            CLIENTS,
            percentile(afterRestart, 50),
            percentile(afterRestart, 100),
            percentile(pushed, 50),
            percentile(pushed, 100));
      } finally {
        clients.forEach(Clients::shutdown);
      }
    }
  }

  /**
   * Waits until every recorder got {@code content}; returns when the last one got it (ms, on
   * {@link System#nanoTime()}'s scale). Fails past {@code within}, naming the listeners that
   * did not.
   */
  static double awaitAll(List<Clients.Recorder> recs, String content, Duration within, String what) {
    try {
      Await.until(within, what + ": every listener gets " + content, () -> recs.stream().allMatch(r -> r.received(content)));
    } catch (AssertionError e) {
      StringBuilder missing = new StringBuilder();
      for (int i = 0; i < recs.size(); i++) {
        if (!recs.get(i).received(content)) {
          missing.append(" listener ").append(i).append(" (last got ").append(last(recs.get(i))).append(')');
        }
      }
      throw new AssertionError(e.getMessage() + "; missing:" + missing, e);
    }
    return recs.stream().mapToLong(r -> r.firstNanos(content)).max().orElse(0) / 1e6;
  }

  private static String last(Clients.Recorder r) {
    List<String> all = r.contents();
    return all.isEmpty() ? "nothing" : all.get(all.size() - 1);
  }

  private static final Pattern SAMPLE = Pattern.compile("(?m)^(\\w+)(?:\\{[^}]*\\})? ([0-9.eE+-]+)$");

  /** The value of an unlabelled sample of the server's {@code /metrics}. */
  static long metric(NacelleServer server, String name) {
    NacelleServer.HttpResult r = server.http("GET", "/metrics", Map.of(), Map.of(), Map.of());
    assertEquals(200, r.status(), r.body());
    Matcher m = SAMPLE.matcher(r.body());
    while (m.find()) {
      if (m.group(1).equals(name)) {
        return (long) Double.parseDouble(m.group(2));
      }
    }
    throw new AssertionError("no " + name + " in /metrics");
  }

  static double percentile(List<Double> values, int p) {
    List<Double> sorted = new ArrayList<>(values);
    Collections.sort(sorted);
    int i = (int) Math.ceil(p / 100.0 * sorted.size()) - 1;
    return sorted.get(Math.max(0, Math.min(i, sorted.size() - 1)));
  }
}
