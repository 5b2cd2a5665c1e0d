package io.nacelle.compat.maintainer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.alibaba.nacos.api.NacosFactory;
import com.alibaba.nacos.api.PropertyKeyConst;
import com.alibaba.nacos.api.config.ConfigService;
import com.alibaba.nacos.api.config.listener.AbstractListener;
import com.alibaba.nacos.api.config.model.ConfigListenerInfo;
import io.nacelle.compat.harness.Await;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;

/**
 * The listener queries: /nacos/v3/admin/cs/config/listener (who listens to a config) and
 * /nacos/v3/admin/cs/listener (what a client IP listens to), with real listeners held open by
 * nacos-client 3.x over gRPC.
 */
class ListenerTest extends MaintainerTestBase {
  static final String GROUP = "LISTEN_GROUP";

  static ConfigListenerInfo listenersOf(String dataId, String ns) {
    try {
      return maintainer.getListeners(dataId, GROUP, ns, true);
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  static ConfigListenerInfo byIp(String ip, boolean all, String ns) {
    try {
      return maintainer.getAllSubClientConfigByIp(ip, all, ns, true);
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  @Test
  void listenersByConfigAndByIp() throws Exception {
    assertTrue(maintainer.createNamespace("listen-ns", "Listen", ""));
    assertTrue(maintainer.publishConfig("watched.properties", GROUP, "public", "w=1"));
    assertTrue(maintainer.publishConfig("watched.properties", GROUP, "listen-ns", "w=ns"));

    // Nobody listens yet.
    ConfigListenerInfo none = listenersOf("watched.properties", "public");
    assertEquals("config", none.getQueryType());
    assertEquals(Map.of(), none.getListenersStatus());

    Properties p = new Properties();
    p.setProperty(PropertyKeyConst.SERVER_ADDR, server.serverAddr());
    p.setProperty(PropertyKeyConst.USERNAME, server.username());
    p.setProperty(PropertyKeyConst.PASSWORD, server.password());
    ConfigService client = NacosFactory.createConfigService(p);
    Properties pns = new Properties();
    pns.putAll(p);
    pns.setProperty(PropertyKeyConst.NAMESPACE, "listen-ns");
    ConfigService nsClient = NacosFactory.createConfigService(pns);
    List<String> received = new CopyOnWriteArrayList<>();
    AbstractListener listener =
        new AbstractListener() {
          @Override
          public void receiveConfigInfo(String configInfo) {
            received.add(configInfo);
          }
        };
    try {
      client.addListener("watched.properties", GROUP, listener);
      nsClient.addListener("watched.properties", GROUP, listener);
      Await.until(WAIT, "the listeners' first callbacks", () -> received.containsAll(List.of("w=1", "w=ns")));

      // By config: the client's IP and the md5 it listens with. The client first listens
      // with an empty md5 (it holds nothing yet), fetches, then listens with the content's
      // md5: the server shows the md5 of the latest listen.
      Await.until(
          WAIT,
          "the listener on watched.properties with the md5 of w=1",
          () -> Map.of("127.0.0.1", md5("w=1")).equals(listenersOf("watched.properties", "public").getListenersStatus()));
      assertEquals("config", listenersOf("watched.properties", "public").getQueryType());
      Await.until(
          WAIT,
          "the listener in listen-ns with the md5 of w=ns",
          () -> Map.of("127.0.0.1", md5("w=ns")).equals(listenersOf("watched.properties", "listen-ns").getListenersStatus()));

      // A publish reaches the listener, and the md5 it holds follows.
      assertTrue(maintainer.publishConfig("watched.properties", GROUP, "public", "w=2"));
      Await.until(WAIT, "the change reaching the listener", () -> received.contains("w=2"));
      Await.until(
          WAIT,
          "the listener holding the new md5",
          () -> md5("w=2").equals(listenersOf("watched.properties", "public").getListenersStatus().get("127.0.0.1")));

      // By IP: group keys (dataId+group, +tenant outside the default namespace).
      ConfigListenerInfo ipAll = byIp("127.0.0.1", true, null);
      assertEquals("ip", ipAll.getQueryType());
      assertEquals(
          Map.of(
              "watched.properties+" + GROUP, md5("w=2"),
              "watched.properties+" + GROUP + "+listen-ns", md5("w=ns")),
          ipAll.getListenersStatus());
      assertEquals(
          Map.of("watched.properties+" + GROUP, md5("w=2")), byIp("127.0.0.1", false, null).getListenersStatus());
      assertEquals(Map.of(), byIp("127.0.0.9", true, null).getListenersStatus());

      // Removing the listener ends it.
      client.removeListener("watched.properties", GROUP, listener);
      Await.until(
          WAIT,
          "the listener gone",
          () -> listenersOf("watched.properties", "public").getListenersStatus().isEmpty());
      assertEquals(
          Map.of("watched.properties+" + GROUP + "+listen-ns", md5("w=ns")),
          byIp("127.0.0.1", true, null).getListenersStatus());
    } finally {
      client.shutDown();
      nsClient.shutDown();
    }
    assertTrue(maintainer.deleteConfig("watched.properties", GROUP, "public"));
    assertTrue(maintainer.deleteConfig("watched.properties", GROUP, "listen-ns"));
  }
}
