package io.nacelle.compat.scenarios;

import com.alibaba.nacos.api.NacosFactory;
import com.alibaba.nacos.api.PropertyKeyConst;
import com.alibaba.nacos.api.config.ConfigService;
import com.alibaba.nacos.api.config.listener.AbstractListener;
import com.alibaba.nacos.api.exception.NacosException;
import io.nacelle.compat.harness.NacelleServer;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CopyOnWriteArrayList;

/** Creating real nacos-client ConfigServices and recording listener callbacks. */
final class Clients {
  static final Duration WAIT = Duration.ofSeconds(30);
  static final String GROUP = "DEFAULT_GROUP";

  private Clients() {}

  /** Properties for a client of {@code server} (credentials when its auth is on). */
  static Properties props(NacelleServer server) {
    Properties p = new Properties();
    p.setProperty(PropertyKeyConst.SERVER_ADDR, server.serverAddr());
    if (server.authEnabled()) {
      p.setProperty(PropertyKeyConst.USERNAME, server.username());
      p.setProperty(PropertyKeyConst.PASSWORD, server.password());
    }
    return p;
  }

  static Properties props(String serverAddr) {
    Properties p = new Properties();
    p.setProperty(PropertyKeyConst.SERVER_ADDR, serverAddr);
    return p;
  }

  static ConfigService config(Properties p) throws NacosException {
    return NacosFactory.createConfigService(p);
  }

  static ConfigService config(NacelleServer server) throws NacosException {
    return config(props(server));
  }

  static void shutdown(ConfigService cs) {
    if (cs != null) {
      try {
        cs.shutDown();
      } catch (NacosException e) {
        System.err.println("shutDown: " + e);
      }
    }
  }

  /** Unique names per test run, so snapshots of earlier runs can never answer. */
  static String uniq(String prefix) {
    return prefix + "-" + Long.toString(System.nanoTime(), 36);
  }

  /** A listener that records every content it is given, with the arrival time. */
  static final class Recorder extends AbstractListener {
    record Call(String content, long nanos) {}

    final List<Call> calls = new CopyOnWriteArrayList<>();

    @Override
    public void receiveConfigInfo(String configInfo) {
      calls.add(new Call(configInfo, System.nanoTime()));
    }

    boolean received(String content) {
      return calls.stream().anyMatch(c -> content.equals(c.content()));
    }

    boolean receivedNull() {
      return calls.stream().anyMatch(c -> c.content() == null);
    }

    /** Arrival time of the first callback with this content, or -1. */
    long firstNanos(String content) {
      return calls.stream().filter(c -> content.equals(c.content())).mapToLong(Call::nanos).findFirst().orElse(-1);
    }

    List<String> contents() {
      return calls.stream().map(Call::content).collect(java.util.stream.Collectors.toList());
    }
  }

  /** Prints a publish→callback delay in a greppable form. */
  static void reportDelay(String what, long publishNanos, long callbackNanos) {
    System.out.printf(
        "[delay] nacos-client %s %s: publish->callback %.1f ms%n",
        System.getProperty("nacos.client.expected.version", "?"), what, (callbackNanos - publishNanos) / 1e6);
  }
}
