package io.nacelle.compat.harness;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Port choice for nacelle processes.
 *
 * <p>Never binds port 0: an ephemeral port (32768–60999 on Linux) can be taken at any time by
 * an outgoing connection of any process. Instead picks random ports in 20000–32000 (below the
 * ephemeral range) and checks that the HTTP port, HTTP+1000 (client gRPC, which Java clients
 * derive) and HTTP+1001 (cluster gRPC) are free right now. A race with another process is still
 * possible; {@link NacelleServer} retries with fresh ports when nacelle reports "Address already
 * in use".
 */
public final class Ports {
  public static final int MIN = 20000;
  public static final int MAX = 31000; // so that +1001 stays below 32768

  private Ports() {}

  /** One HTTP port whose +1000 and +1001 are free as well. */
  public static int pickHttpPort() {
    return pickHttpPorts(1).get(0);
  }

  /**
   * {@code count} HTTP ports, pairwise at least 2 apart, each with +1000 and +1001 free, and no
   * port of one node's triple equal to another's.
   */
  public static List<Integer> pickHttpPorts(int count) {
    for (int attempt = 0; attempt < 10_000; attempt++) {
      List<Integer> chosen = new ArrayList<>();
      List<Integer> used = new ArrayList<>();
      boolean ok = true;
      for (int i = 0; i < count && ok; i++) {
        int p = ThreadLocalRandom.current().nextInt(MIN, MAX);
        int[] triple = {p, p + 1000, p + 1001};
        for (int q : triple) {
          for (int u : used) {
            if (Math.abs(u - q) < 2) {
              ok = false;
            }
          }
        }
        if (ok && isFree(p) && isFree(p + 1000) && isFree(p + 1001)) {
          chosen.add(p);
          for (int q : triple) {
            used.add(q);
          }
        } else {
          ok = false;
        }
      }
      if (ok) {
        return chosen;
      }
    }
    throw new IllegalStateException("no free ports found in " + MIN + "-" + MAX);
  }

  /** A single free port (for relays and the like), same range and rules. */
  public static int pickSinglePort() {
    for (int attempt = 0; attempt < 10_000; attempt++) {
      int p = ThreadLocalRandom.current().nextInt(MIN, MAX);
      if (isFree(p)) {
        return p;
      }
    }
    throw new IllegalStateException("no free port found in " + MIN + "-" + MAX);
  }

  /** True when the port can be bound on all addresses and on 127.0.0.1 right now. */
  public static boolean isFree(int port) {
    return canBind(new InetSocketAddress(port))
        && canBind(new InetSocketAddress(InetAddress.getLoopbackAddress(), port));
  }

  private static boolean canBind(InetSocketAddress addr) {
    try (ServerSocket s = new ServerSocket()) {
      s.setReuseAddress(false);
      s.bind(addr);
      return true;
    } catch (IOException e) {
      return false;
    }
  }
}
