package io.nacelle.compat.v3;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.alibaba.nacos.api.NacosFactory;
import com.alibaba.nacos.api.PropertyKeyConst;
import com.alibaba.nacos.api.config.ConfigService;
import com.alibaba.nacos.api.config.listener.AbstractFuzzyWatchEventWatcher;
import com.alibaba.nacos.api.config.listener.AbstractListener;
import com.alibaba.nacos.api.config.listener.ConfigFuzzyWatchChangeEvent;
import io.nacelle.compat.harness.Await;
import io.nacelle.compat.harness.NacelleLogOnFailure;
import io.nacelle.compat.harness.NacelleServer;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Nacos 3.x fuzzy watch ({@code ConfigService.fuzzyWatch}). The Java client reports keys that
 * enter the pattern (ADD_CONFIG) and leave it (DELETE_CONFIG); a content change of a matched key
 * is not a fuzzy event in the Java client (it treats CONFIG_CHANGED as "add if new"), so the
 * usual pattern is tested: the watcher adds a listener for every added key, and that listener
 * gets the change.
 */
@ExtendWith(NacelleLogOnFailure.class)
class FuzzyWatchTest {
  static final Duration WAIT = Duration.ofSeconds(30);
  static NacelleServer server;
  static ConfigService client;

  @BeforeAll
  static void start() throws Exception {
    server = NacelleServer.builder().name("fuzzy").auth(true).start();
    Properties p = new Properties();
    p.setProperty(PropertyKeyConst.SERVER_ADDR, server.serverAddr());
    p.setProperty(PropertyKeyConst.USERNAME, server.username());
    p.setProperty(PropertyKeyConst.PASSWORD, server.password());
    client = NacosFactory.createConfigService(p);
  }

  @AfterAll
  static void stop() throws Exception {
    if (client != null) {
      client.shutDown();
    }
    if (server != null) {
      server.close();
    }
  }

  record Event(String dataId, String group, String changedType, String syncType, long nanos) {}

  static final class Watcher extends AbstractFuzzyWatchEventWatcher {
    final List<Event> events = new CopyOnWriteArrayList<>();
    final List<String> contents = new CopyOnWriteArrayList<>();

    @Override
    public void onEvent(ConfigFuzzyWatchChangeEvent e) {
      events.add(new Event(e.getDataId(), e.getGroup(), e.getChangedType(), e.getSyncType(), System.nanoTime()));
      if ("ADD_CONFIG".equals(e.getChangedType())) {
        try {
          // what an application does with a discovered key: listen to it
          client.addListener(
              e.getDataId(),
              e.getGroup(),
              new AbstractListener() {
                @Override
                public void receiveConfigInfo(String configInfo) {
                  contents.add(e.getDataId() + "=" + configInfo);
                }
              });
        } catch (Exception ex) {
          throw new IllegalStateException(ex);
        }
      }
    }

    boolean has(String dataId, String type) {
      return events.stream().anyMatch(ev -> ev.dataId().equals(dataId) && ev.changedType().equals(type));
    }

    long nanos(String dataId, String type) {
      return events.stream()
          .filter(ev -> ev.dataId().equals(dataId) && ev.changedType().equals(type))
          .mapToLong(Event::nanos)
          .findFirst()
          .orElse(-1);
    }
  }

  @Test
  void groupPatternReportsAddChangeAndRemoval() throws Exception {
    String group = "FUZZY_" + Long.toString(System.nanoTime(), 36).toUpperCase();
    server.publish("existing.yaml", group, "e: 1");
    Watcher w = new Watcher();
    // fuzzyWatchWithGroupKeys returns the keys matched at the start
    Set<String> initial = client.fuzzyWatchWithGroupKeys(group, w).get(20, TimeUnit.SECONDS);
    System.out.println("[fuzzy] initial keys " + initial);
    assertTrue(initial.stream().anyMatch(k -> k.startsWith("existing.yaml+" + group)), "initial keys: " + initial);
    Await.until(WAIT, "the existing key is reported ADD_CONFIG (events " + w.events + ")", () -> w.has("existing.yaml", "ADD_CONFIG"));

    long t0 = System.nanoTime();
    server.publish("added.properties", group, "a=1");
    Await.until(WAIT, "a new key is reported ADD_CONFIG (events " + w.events + ")", () -> w.has("added.properties", "ADD_CONFIG"));
    System.out.printf("[delay] nacos-client %s fuzzy watch ADD_CONFIG: publish->event %.1f ms%n",
        System.getProperty("nacos.client.expected.version"), (w.nanos("added.properties", "ADD_CONFIG") - t0) / 1e6);
    Await.until(WAIT, "the listener added on ADD_CONFIG gets the first value", () -> w.contents.contains("added.properties=a=1"));

    server.publish("added.properties", group, "a=2");
    Await.until(WAIT, "the change reaches the listener of the discovered key (" + w.contents + ")", () -> w.contents.contains("added.properties=a=2"));

    server.publish("other.yaml", "OTHER_" + group, "x: 1"); // another group: not matched
    server.delete("added.properties", group);
    Await.until(WAIT, "the removal is reported DELETE_CONFIG (events " + w.events + ")", () -> w.has("added.properties", "DELETE_CONFIG"));
    assertTrue(w.events.stream().noneMatch(e -> e.dataId().equals("other.yaml")), "no event for another group: " + w.events);
    for (Event e : w.events) {
      assertEquals(group, e.group(), "events only for the watched group: " + w.events);
    }
  }

  @Test
  void dataIdAndGroupPattern() throws Exception {
    String group = "FZ_" + Long.toString(System.nanoTime(), 36).toUpperCase();
    Watcher w = new Watcher();
    client.fuzzyWatch("svc-*", group, w);
    server.publish("svc-a.yaml", group, "a: 1");
    server.publish("db-a.yaml", group, "b: 1"); // not matched by the dataId pattern
    Await.until(WAIT, "svc-a.yaml added (events " + w.events + ")", () -> w.has("svc-a.yaml", "ADD_CONFIG"));
    server.delete("svc-a.yaml", group);
    Await.until(WAIT, "svc-a.yaml removed (events " + w.events + ")", () -> w.has("svc-a.yaml", "DELETE_CONFIG"));
    assertTrue(w.events.stream().noneMatch(e -> e.dataId().equals("db-a.yaml")), "db-a.yaml is not matched: " + w.events);
    client.cancelFuzzyWatch("svc-*", group, w);
  }

  @Test
  void watchSurvivesServerRestart() throws Exception {
    try (NacelleServer own = NacelleServer.builder().name("fuzzy-restart").auth(false).start()) {
      Properties p = new Properties();
      p.setProperty(PropertyKeyConst.SERVER_ADDR, own.serverAddr());
      ConfigService c = NacosFactory.createConfigService(p);
      try {
        String group = "FR_" + Long.toString(System.nanoTime(), 36).toUpperCase();
        own.publish("before.yaml", group, "b: 1");
        Watcher w = new Watcher();
        c.fuzzyWatchWithGroupKeys(group, w).get(20, TimeUnit.SECONDS);
        Await.until(WAIT, "before.yaml reported (events " + w.events + ")", () -> w.has("before.yaml", "ADD_CONFIG"));

        own.stop();
        own.start(); // same ports and data: the client reconnects and re-sends its pattern
        own.delete("before.yaml", group);
        own.publish("after.yaml", group, "a: 1");
        Await.until(Duration.ofSeconds(60), "after.yaml added after the restart (events " + w.events + ")", () -> w.has("after.yaml", "ADD_CONFIG"));
        Await.until(WAIT, "before.yaml removed after the restart (events " + w.events + ")", () -> w.has("before.yaml", "DELETE_CONFIG"));
      } finally {
        c.shutDown();
      }
    }
  }
}
