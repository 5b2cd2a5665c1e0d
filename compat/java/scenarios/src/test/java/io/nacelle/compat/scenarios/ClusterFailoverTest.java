package io.nacelle.compat.scenarios;

import static io.nacelle.compat.scenarios.Clients.GROUP;
import static org.junit.jupiter.api.Assertions.assertEquals;

import com.alibaba.nacos.api.config.ConfigService;
import io.nacelle.compat.harness.Await;
import io.nacelle.compat.harness.NacelleCluster;
import io.nacelle.compat.harness.NacelleLogOnFailure;
import io.nacelle.compat.harness.NacelleServer;
import io.nacelle.compat.harness.TestDatabase;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Two nacelle nodes on one database; the client has both addresses, the node it is connected to
 * is killed, a change is published through the other, and the listener gets it. Needs
 * NACELLE_TEST_POSTGRES_URL or NACELLE_TEST_MYSQL_URL (fails, not skipped, without).
 */
@ExtendWith(NacelleLogOnFailure.class)
class ClusterFailoverTest {

  /** The node that holds the client's listen on {@code id} (node-local listener query), or null. */
  private static NacelleServer listeningNode(NacelleCluster cluster, String id) {
    for (NacelleServer n : cluster.nodes()) {
      if (!n.isRunning()) {
        continue;
      }
      var r = n.http("GET", "/nacos/v1/cs/configs/listener", Map.of("dataId", id, "group", GROUP), Map.of(), Map.of());
      if (r.status() == 200 && r.body().contains("\"lisentersGroupkeyStatus\":{\"")) {
        return n;
      }
    }
    return null;
  }

  @Test
  void clientFailsOverToTheOtherNode() throws Exception {
    try (TestDatabase db = TestDatabase.create();
        NacelleCluster cluster = NacelleCluster.start(2, db.url(), true)) {
      System.out.println("[cluster] " + db.kind() + " database " + db.name() + ", nodes " + cluster.serverAddr());
      var props = Clients.props(cluster.node(0));
      props.setProperty("serverAddr", cluster.serverAddr());
      ConfigService client = Clients.config(props);
      try {
        String id = Clients.uniq("failover") + ".properties";
        cluster.node(0).publish(id, GROUP, "gen=1");
        Await.until(Clients.WAIT, "node 2 serves the key", () -> "gen=1".equals(cluster.node(1).get(id, GROUP)));
        Clients.Recorder rec = new Clients.Recorder();
        assertEquals("gen=1", client.getConfigAndSignListener(id, GROUP, 5000, rec));

        NacelleServer connected =
            Await.value(Clients.WAIT, "one node reports the client's listener", () -> listeningNode(cluster, id));
        NacelleServer other = connected == cluster.node(0) ? cluster.node(1) : cluster.node(0);
        System.out.println("[cluster] client listens on " + connected + "; killing it, publishing via " + other);

        // a change through the other node reaches the client while both run
        long t0 = System.nanoTime();
        other.publish(id, GROUP, "gen=2");
        Await.until(Clients.WAIT, "change via the other node reaches the listener (got " + rec.contents() + ")", () -> rec.received("gen=2"));
        Clients.reportDelay("cluster, published on the other node", t0, rec.firstNanos("gen=2"));

        connected.kill();
        long t1 = System.nanoTime();
        other.publish(id, GROUP, "gen=3");
        Await.until(
            Duration.ofSeconds(60),
            "after its node died the listener gets the change via the other node (got " + rec.contents() + ")",
            () -> rec.received("gen=3"));
        Clients.reportDelay("cluster failover (includes reconnect)", t1, rec.firstNanos("gen=3"));
        assertEquals("gen=3", client.getConfig(id, GROUP, 5000));
        Await.value(Clients.WAIT, "the surviving node holds the client's listen", () -> listeningNode(cluster, id) == other ? other : null);
      } finally {
        Clients.shutdown(client);
      }
    }
  }
}
