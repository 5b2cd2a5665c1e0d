package io.nacelle.compat.scenarios;

import static io.nacelle.compat.scenarios.Clients.GROUP;
import static org.junit.jupiter.api.Assertions.assertEquals;

import com.alibaba.nacos.api.config.ConfigService;
import io.nacelle.compat.harness.Await;
import io.nacelle.compat.harness.NacelleLogOnFailure;
import io.nacelle.compat.harness.NacelleServer;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Measures (prints, never asserts) publish → listener callback with the Java client, for the
 * figures of docs/compatibility.md: changes spaced as configuration changes usually are (1 s
 * apart or more), and changes made right after the previous callback. The client runs each
 * identical request through its own rate limiter ({@code Limiter}: 5 per second per request
 * text, bursts of up to 5 after a second idle); the requests that follow a push are the same
 * from one change of a key to the next, so a change right after the previous one waits.
 */
@ExtendWith(NacelleLogOnFailure.class)
class PublishLatencyTest {
  static final int SAMPLES = 15;

  @Test
  void publishToCallbackDelays() throws Exception {
    try (NacelleServer server = NacelleServer.builder().name("latency").auth(false).start()) {
      ConfigService client = Clients.config(server);
      try {
        String id = Clients.uniq("latency") + ".properties";
        server.publish(id, GROUP, "n=0");
        Clients.Recorder rec = new Clients.Recorder();
        assertEquals("n=0", client.getConfigAndSignListener(id, GROUP, 5000, rec));
        server.publish(id, GROUP, "n=warm");
        Await.until(Clients.WAIT, "the listener is called", () -> rec.received("n=warm"));

        List<Double> spaced = new ArrayList<>();
        for (int i = 1; i <= SAMPLES; i++) {
          // Spacing of samples, not a wait for something to (not) happen: the limiter's
          // permits refill within a second.
          Thread.sleep(1100);
          spaced.add(sample(server, id, rec, "spaced=" + i));
        }
        List<Double> backToBack = new ArrayList<>();
        for (int i = 1; i <= SAMPLES; i++) {
          backToBack.add(sample(server, id, rec, "next=" + i));
        }
        System.out.printf(
            "[delay] nacos-client %s publish->callback, %d changes 1.1 s apart: p50 %.1f ms (min %.1f, max %.1f);"
                + " %d changes each right after the previous callback: p50 %.1f ms (min %.1f, max %.1f)%n",
            System.getProperty("nacos.client.expected.version", "?"),
            SAMPLES,
            percentile(spaced, 50),
            percentile(spaced, 0),
            percentile(spaced, 100),
            SAMPLES,
            percentile(backToBack, 50),
            percentile(backToBack, 0),
            percentile(backToBack, 100));
      } finally {
        Clients.shutdown(client);
      }
    }
  }

  /** Publishes {@code content} over HTTP (another writer) and returns the delay until the callback, ms. */
  private static double sample(NacelleServer server, String id, Clients.Recorder rec, String content) {
    long t0 = System.nanoTime();
    server.publish(id, GROUP, content);
    Await.until(Clients.WAIT, "the listener gets " + content, () -> rec.received(content));
    return (rec.firstNanos(content) - t0) / 1e6;
  }

  static double percentile(List<Double> values, int p) {
    List<Double> sorted = new ArrayList<>(values);
    Collections.sort(sorted);
    int i = (int) Math.ceil(p / 100.0 * sorted.size()) - 1;
    return sorted.get(Math.max(0, Math.min(i, sorted.size() - 1)));
  }
}
