package io.nacelle.compat.scenarios;

import static io.nacelle.compat.scenarios.Clients.GROUP;
import static io.nacelle.compat.scenarios.Clients.WAIT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.alibaba.nacos.api.PropertyKeyConst;
import com.alibaba.nacos.api.config.ConfigService;
import io.nacelle.compat.harness.Await;
import io.nacelle.compat.harness.NacelleLogOnFailure;
import io.nacelle.compat.harness.NacelleServer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The config round trip over gRPC with one server (auth off). */
@ExtendWith(NacelleLogOnFailure.class)
class CoreConfigTest {
  static NacelleServer server;
  static ConfigService client;

  @BeforeAll
  static void start() throws Exception {
    server = NacelleServer.builder().name("core").auth(false).start();
    client = Clients.config(server);
  }

  @AfterAll
  static void stop() {
    Clients.shutdown(client);
    if (server != null) {
      server.close();
    }
  }

  @Test
  void publishGetRemove() throws Exception {
    String id = Clients.uniq("round-trip") + ".properties";
    assertNull(client.getConfig(id, GROUP, 5000), "a missing key reads as null");
    assertTrue(client.publishConfig(id, GROUP, "a=1"));
    assertEquals("a=1", client.getConfig(id, GROUP, 5000));
    assertEquals("a=1", server.get(id, GROUP), "the server stored what the client published");
    assertTrue(client.publishConfig(id, GROUP, "a=2", "properties"));
    assertEquals("a=2", client.getConfig(id, GROUP, 5000));
    assertEquals("properties", server.getResult("", id, GROUP, java.util.Map.of()).header("Config-Type"), "type kept");

    // compare-and-set on the md5 of the current content (casMd5 on ConfigPublishRequest)
    String md5 = md5Hex("a=2");
    assertFalse(client.publishConfigCas(id, GROUP, "a=lost", md5Hex("not the current content")), "CAS with a stale md5 fails");
    assertEquals("a=2", server.get(id, GROUP));
    assertTrue(client.publishConfigCas(id, GROUP, "a=3", md5), "CAS with the current md5 succeeds");
    assertEquals("a=3", client.getConfig(id, GROUP, 5000));
    assertTrue(client.removeConfig(id, GROUP));
    assertNull(server.get(id, GROUP), "removed on the server");
    assertNull(client.getConfig(id, GROUP, 5000), "removed for the client");
  }

  static String md5Hex(String s) throws Exception {
    return java.util.HexFormat.of()
        .formatHex(java.security.MessageDigest.getInstance("MD5").digest(s.getBytes(StandardCharsets.UTF_8)));
  }

  @Test
  void listenerFiresOnChange() throws Exception {
    String id = Clients.uniq("listened") + ".yaml";
    server.publish(id, GROUP, "v: 1");
    Clients.Recorder rec = new Clients.Recorder();
    client.getConfigAndSignListener(id, GROUP, 5000, rec);
    long t0 = System.nanoTime();
    server.publish(id, GROUP, "v: 2");
    Await.until(WAIT, "listener gets v: 2 (got " + rec.contents() + ")", () -> rec.received("v: 2"));
    Clients.reportDelay("HTTP publish (other writer)", t0, rec.firstNanos("v: 2"));

    long t1 = System.nanoTime();
    assertTrue(client.publishConfig(id, GROUP, "v: 3"));
    Await.until(WAIT, "listener gets v: 3 (got " + rec.contents() + ")", () -> rec.received("v: 3"));
    Clients.reportDelay("gRPC publish (same client)", t1, rec.firstNanos("v: 3"));

    // a removal reaches the listener as null content (the Java client's "config deleted")
    server.delete(id, GROUP);
    Await.until(WAIT, "listener told of the removal (got " + rec.contents() + ")", rec::receivedNull);
  }

  @Test
  void listenerBeforeKeyExistsGetsFirstValue() throws Exception {
    String id = Clients.uniq("later") + ".json";
    Clients.Recorder rec = new Clients.Recorder();
    client.addListener(id, GROUP, rec);
    long t0 = System.nanoTime();
    server.publish(id, GROUP, "{\"born\":true}");
    Await.until(WAIT, "listener gets the first value (got " + rec.contents() + ")", () -> rec.received("{\"born\":true}"));
    Clients.reportDelay("first value of a new key", t0, rec.firstNanos("{\"born\":true}"));
  }

  @Test
  void twentyKeysOnOneClient() throws Exception {
    String base = Clients.uniq("many");
    List<Clients.Recorder> recs = new ArrayList<>();
    for (int i = 0; i < 20; i++) {
      String id = base + "-" + i;
      server.publish(id, GROUP, "start " + i);
      Clients.Recorder r = new Clients.Recorder();
      client.getConfigAndSignListener(id, GROUP, 5000, r);
      recs.add(r);
    }
    for (int i = 0; i < 20; i++) {
      server.publish(base + "-" + i, GROUP, "changed " + i);
    }
    for (int i = 0; i < 20; i++) {
      Clients.Recorder r = recs.get(i);
      String want = "changed " + i;
      Await.until(WAIT, "key " + i + " listener gets its change (got " + r.contents() + ")", () -> r.received(want));
      for (String c : r.contents()) {
        assertTrue(c.endsWith(" " + i), "listener " + i + " only sees its own key: " + r.contents());
      }
    }
  }

  /** A dataId and group in Chinese (Nacos names are letters and digits, Unicode-aware). */
  @Test
  void unicodeNames() throws Exception {
    String id = "配置-" + Clients.uniq("中文") + ".yaml";
    String group = "组_" + Long.toString(System.nanoTime(), 36);
    assertTrue(client.publishConfig(id, group, "名字: 值"));
    assertEquals("名字: 值", client.getConfig(id, group, 5000));
    assertEquals("名字: 值", server.get(id, group));
    Clients.Recorder rec = new Clients.Recorder();
    client.getConfigAndSignListener(id, group, 5000, rec);
    server.publish(id, group, "名字: 新值 🌏");
    Await.until(WAIT, "listener of a Chinese dataId gets the change (got " + rec.contents() + ")", () -> rec.received("名字: 新值 🌏"));
    assertTrue(client.removeConfig(id, group));
    Await.until(WAIT, "removal seen", rec::receivedNull);
  }

  /** 2 MiB over gRPC both ways (Nacos allows 10 MB; gRPC messages up to 10 MB). */
  @Test
  void twoMebibytes() throws Exception {
    String id = Clients.uniq("two-mib") + ".txt";
    StringBuilder sb = new StringBuilder(2 * 1024 * 1024);
    int i = 0;
    while (sb.length() < 2 * 1024 * 1024) {
      sb.append("line ").append(i++).append(" ü€😀\n");
    }
    String big = sb.toString();
    Clients.Recorder rec = new Clients.Recorder();
    client.addListener(id, GROUP, rec);
    assertTrue(client.publishConfig(id, GROUP, big));
    assertEquals(big, client.getConfig(id, GROUP, 10000));
    Await.until(WAIT, "listener gets the 2 MiB value", () -> rec.received(big));
    assertEquals(md5Hex(big), server.getResult("", id, GROUP, java.util.Map.of()).header("Content-MD5"));
  }

  /**
   * More keys than the Java client puts on one connection (3000 per "task"): keys 3000+ are
   * listened on a second gRPC connection of the same client (label taskId=1).
   */
  @Test
  void moreKeysThanOneConnectionHolds() throws Exception {
    ConfigService big = Clients.config(server);
    try {
      String base = Clients.uniq("wide");
      List<Clients.Recorder> recs = new ArrayList<>();
      for (int i = 0; i < 3100; i++) {
        Clients.Recorder r = new Clients.Recorder();
        big.addListener(base + "-" + i, GROUP, r);
        recs.add(r);
      }
      for (int i : new int[] {7, 2999, 3000, 3099}) {
        long t0 = System.nanoTime();
        server.publish(base + "-" + i, GROUP, "value " + i);
        Clients.Recorder r = recs.get(i);
        Await.until(WAIT, "listener of key " + i + " of 3100 fires (got " + r.contents() + ")", () -> r.received("value " + i));
        Clients.reportDelay("key " + i + " of 3100", t0, r.firstNanos("value " + i));
      }
      assertTrue(recs.get(8).contents().isEmpty() && recs.get(3001).contents().isEmpty(), "unchanged keys stay quiet");
    } finally {
      Clients.shutdown(big);
    }
  }

  @Test
  void nonDefaultNamespace() throws Exception {
    String ns = Clients.uniq("ns-java");
    server.createNamespace(ns, "Java compat " + ns);
    Properties p = Clients.props(server);
    p.setProperty(PropertyKeyConst.NAMESPACE, ns);
    ConfigService nsClient = Clients.config(p);
    try {
      String id = "shared-name.properties";
      server.publish(id, GROUP, "in public");
      assertTrue(nsClient.publishConfig(id, GROUP, "in " + ns));
      assertEquals("in " + ns, nsClient.getConfig(id, GROUP, 5000));
      assertEquals("in " + ns, server.get(ns, id, GROUP), "stored under the namespace");
      assertEquals("in public", server.get(id, GROUP), "the default namespace is apart");
      assertEquals("in public", client.getConfig(id, GROUP, 5000));

      Clients.Recorder rec = new Clients.Recorder();
      assertEquals("in " + ns, nsClient.getConfigAndSignListener(id, GROUP, 5000, rec));
      long t0 = System.nanoTime();
      server.publish(ns, id, GROUP, "changed in " + ns, java.util.Map.of(), java.util.Map.of());
      Await.until(WAIT, "namespaced listener gets the change (got " + rec.contents() + ")", () -> rec.received("changed in " + ns));
      Clients.reportDelay("namespace " + ns, t0, rec.firstNanos("changed in " + ns));
      server.publish(id, GROUP, "public changed");
      assertEquals("public changed", client.getConfig(id, GROUP, 5000));
      assertTrue(rec.contents().stream().noneMatch(c -> c.contains("public")), "no cross-namespace callback: " + rec.contents());
      assertTrue(nsClient.removeConfig(id, GROUP));
      assertNull(server.get(ns, id, GROUP));
      assertEquals("public changed", server.get(id, GROUP));
    } finally {
      Clients.shutdown(nsClient);
    }
  }

  @Test
  void bigAndUnicodeContentRoundTrip() throws Exception {
    StringBuilder sb = new StringBuilder();
    int line = 0;
    while (sb.length() < 64 * 1024) {
      sb.append("key.").append(line).append("=value ").append(line++).append(" ").append("x".repeat(50)).append('\n');
    }
    String big = sb.substring(0, 64 * 1024);
    assertEquals(65536, big.getBytes(StandardCharsets.UTF_8).length);
    String unicode = "名字=配置中心\n问候=你好，世界\nemoji=🚀🔥👩‍💻 ✓\nmixed=Ünïcödé ß € \u0000end?";
    unicode = unicode.replace("\u0000", ""); // NUL is not a config character
    String bigId = Clients.uniq("big") + ".txt";
    String uniId = Clients.uniq("unicode") + ".properties";

    assertTrue(client.publishConfig(bigId, GROUP, big));
    assertEquals(big, client.getConfig(bigId, GROUP, 5000), "64 KiB read back over gRPC");
    assertEquals(big, server.get(bigId, GROUP), "64 KiB read back over HTTP");

    assertTrue(client.publishConfig(uniId, GROUP, unicode));
    assertEquals(unicode, client.getConfig(uniId, GROUP, 5000));
    assertEquals(unicode, server.get(uniId, GROUP));

    // and the other way round: written over HTTP, pushed to a listener
    Clients.Recorder rec = new Clients.Recorder();
    client.getConfigAndSignListener(uniId, GROUP, 5000, rec);
    String unicode2 = unicode + "\n再见=👋";
    server.publish(uniId, GROUP, unicode2);
    Await.until(WAIT, "listener gets the Unicode change", () -> rec.received(unicode2));
    String big2 = big.substring(0, big.length() - 2) + "🎉";
    Clients.Recorder bigRec = new Clients.Recorder();
    client.getConfigAndSignListener(bigId, GROUP, 5000, bigRec);
    server.publish(bigId, GROUP, big2);
    Await.until(WAIT, "listener gets the 64 KiB change", () -> bigRec.received(big2));
  }
}
