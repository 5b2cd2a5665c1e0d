package io.nacelle.compat.scenarios;

import static io.nacelle.compat.scenarios.Clients.GROUP;
import static org.junit.jupiter.api.Assertions.assertEquals;

import com.alibaba.nacos.api.config.ConfigService;
import io.nacelle.compat.harness.Await;
import io.nacelle.compat.harness.NacelleLogOnFailure;
import io.nacelle.compat.harness.NacelleServer;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The server restarts under a listening client: the client reconnects and re-listens. */
@ExtendWith(NacelleLogOnFailure.class)
class RestartTest {
  @Test
  void listenerSurvivesServerRestart() throws Exception {
    try (NacelleServer server = NacelleServer.builder().name("restart").auth(true).start()) {
      ConfigService client = Clients.config(server);
      try {
        String id = Clients.uniq("restart") + ".yaml";
        server.publish(id, GROUP, "gen: 1");
        Clients.Recorder rec = new Clients.Recorder();
        assertEquals("gen: 1", client.getConfigAndSignListener(id, GROUP, 5000, rec));

        server.stop(); // SIGTERM
        server.start(); // same ports, same data dir
        long t0 = System.nanoTime();
        server.publish(id, GROUP, "gen: 2");
        Await.until(
            Duration.ofSeconds(60),
            "listener gets the change made after the restart (got " + rec.contents() + ")",
            () -> rec.received("gen: 2"));
        Clients.reportDelay("after restart (includes reconnect)", t0, rec.firstNanos("gen: 2"));
        assertEquals("gen: 2", client.getConfig(id, GROUP, 5000));

        // once reconnected, changes are pushed as before
        long t1 = System.nanoTime();
        server.publish(id, GROUP, "gen: 3");
        Await.until(Clients.WAIT, "listener gets the next change", () -> rec.received("gen: 3"));
        Clients.reportDelay("after restart, reconnected", t1, rec.firstNanos("gen: 3"));
      } finally {
        Clients.shutdown(client);
      }
    }
  }
}
