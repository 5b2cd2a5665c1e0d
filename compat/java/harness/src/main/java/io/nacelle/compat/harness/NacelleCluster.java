package io.nacelle.compat.harness;

import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.stream.Collectors;

/**
 * Several nacelle nodes on one shared database ({@code --db}), listed in each other's {@code
 * --members}, with one cluster secret (and one token secret when auth is on). HTTP ports are at
 * least 2 apart and each node's +1000/+1001 are free; the whole cluster is restarted on fresh
 * ports if a node reports "Address already in use".
 */
public final class NacelleCluster implements AutoCloseable {
  private final List<NacelleServer> nodes;

  private NacelleCluster(List<NacelleServer> nodes) {
    this.nodes = nodes;
  }

  /**
   * Starts {@code count} nodes on the database {@code dbUrl} (e.g. {@link TestDatabase#url()}).
   */
  public static NacelleCluster start(int count, String dbUrl, boolean auth, String... extraArgs) {
    byte[] secret = new byte[32];
    ThreadLocalRandom.current().nextBytes(secret);
    String tokenSecret = Base64.getEncoder().encodeToString(secret);
    String clusterSecret = "cluster-secret-" + Long.toHexString(ThreadLocalRandom.current().nextLong());
    String adminPassword = "Pw-" + Long.toHexString(ThreadLocalRandom.current().nextLong());
    RuntimeException last = null;
    for (int attempt = 0; attempt < 8; attempt++) {
      List<Integer> ports = Ports.pickHttpPorts(count);
      String members = ports.stream().map(p -> "127.0.0.1:" + p).collect(Collectors.joining(","));
      List<NacelleServer> started = new ArrayList<>();
      try {
        for (int i = 0; i < count; i++) {
          NacelleServer.Builder b =
              NacelleServer.builder()
                  .name("node" + (i + 1))
                  .auth(auth)
                  .httpPort(ports.get(i))
                  .adminPassword(adminPassword)
                  .args("--db", dbUrl, "--members", members, "--cluster-secret", clusterSecret)
                  .args(extraArgs);
          if (auth) {
            b.env("NACELLE_AUTH_TOKEN_SECRET", tokenSecret);
          }
          started.add(b.start());
        }
        return new NacelleCluster(started);
      } catch (NacelleServer.AddressInUse e) {
        System.err.println("[harness] cluster port taken, retrying on fresh ports: " + e.getMessage());
        started.forEach(NacelleServer::close);
        last = e;
      } catch (RuntimeException e) {
        started.forEach(NacelleServer::close);
        throw e;
      }
    }
    throw new IllegalStateException("could not start the cluster", last);
  }

  public List<NacelleServer> nodes() {
    return nodes;
  }

  public NacelleServer node(int i) {
    return nodes.get(i);
  }

  /** {@code 127.0.0.1:p1,127.0.0.1:p2,…} for a client's serverAddr. */
  public String serverAddr() {
    return nodes.stream().map(NacelleServer::serverAddr).collect(Collectors.joining(","));
  }

  /** The node whose gRPC port is {@code port}, or null. */
  public NacelleServer nodeByGrpcPort(int port) {
    for (NacelleServer n : nodes) {
      if (n.grpcPort() == port) {
        return n;
      }
    }
    return null;
  }

  @Override
  public void close() {
    for (NacelleServer n : nodes) {
      n.close();
    }
  }
}
