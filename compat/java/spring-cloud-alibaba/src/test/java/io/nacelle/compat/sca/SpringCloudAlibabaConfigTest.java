package io.nacelle.compat.sca;

import static io.nacelle.compat.sca.ScaFixture.md5;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * The Spring Cloud Alibaba app of this module, unchanged, against a real nacelle with
 * authentication on: the app logs in as a user that may only read, loads app.yaml,
 * shared.yaml and the optional late.yaml through {@code spring.config.import}, and follows
 * every publish made over HTTP by the test in its {@code @RefreshScope} bean and its
 * {@code @ConfigurationProperties} bean. The steps build on each other, in order.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class SpringCloudAlibabaConfigTest {

  /** app.yaml and late.yaml: the app's default group; shared.yaml: a group of its own. */
  private static final String GROUP = "DEFAULT_GROUP";
  private static final String SHARED_GROUP = "SHARED_GROUP";
  private static final String APP_USER = "sca-app";
  private static final String APP_PASSWORD = "sca-app-Pw-1";

  private ScaFixture sca;

  @BeforeAll
  void start() {
    sca = ScaFixture.start("sca");
    // The app runs as production apps do: its own user, with read permission only.
    sca.createUser(APP_USER, APP_PASSWORD, ":*:*", "r");
    sca.publish("", "shared.yaml", SHARED_GROUP, "demo:\n  shared: shared-v1\n  overridden: from-shared-v1\n");
    sca.publish("", "app.yaml", GROUP, "demo:\n  greeting: hello-v1\n  overridden: from-app-v1\n");
    sca.startApp(APP_USER, APP_PASSWORD);
  }

  @AfterAll
  void stop() {
    if (sca != null) {
      sca.close();
    }
  }

  @Test
  @Order(1)
  void servesTheInitialValues() {
    Map<String, Map<String, String>> v = values();
    for (String bean : new String[] {"refreshScope", "properties", "environment"}) {
      assertEquals("hello-v1", v.get(bean).get("greeting"), bean + " greeting from app.yaml");
      assertEquals("shared-v1", v.get(bean).get("shared"), bean + " shared from shared.yaml");
      assertEquals("from-app-v1", v.get(bean).get("overridden"), bean + ": app.yaml overrides shared.yaml");
      assertEquals("unset", v.get(bean).get("late"), bean + ": late.yaml does not exist yet");
    }
  }

  @Test
  @Order(2)
  void actuatorHealthReportsNacosConfigUp() {
    Map<String, Object> health = getJson("/actuator/health");
    @SuppressWarnings("unchecked")
    Map<String, Object> components = (Map<String, Object>) health.get("components");
    @SuppressWarnings("unchecked")
    Map<String, Object> nacos = (Map<String, Object>) components.getOrDefault("nacosConfig", Map.of());
    assertEquals("UP", nacos.get("status"), "nacosConfig health: " + health);
    Map<String, Object> endpoint = getJson("/actuator/nacosconfig");
    @SuppressWarnings("unchecked")
    List<Map<String, Object>> sources = (List<Map<String, Object>>) endpoint.get("Sources");
    // (kept in a hash map by SCA: no order)
    assertEquals(Set.of("late.yaml", "shared.yaml", "app.yaml"),
        sources.stream().map(src -> src.get("dataId")).collect(Collectors.toSet()), "SCA's Nacos sources: " + sources);
  }

  @Test
  @Order(3)
  void aChangeOfAppYamlReachesBothBeans() {
    Map<String, Map<String, String>> v = publishAndAwait("app.yaml",
        "demo:\n  greeting: hello-v2\n  overridden: from-app-v1\n",
        "greeting", "hello-v2");
    assertEquals("shared-v1", v.get("refreshScope").get("shared"));
    assertEquals("shared-v1", v.get("properties").get("shared"));
  }

  @Test
  @Order(4)
  void aChangeOfSharedYamlReachesBothBeansAndAppYamlStillOverridesIt() {
    Map<String, Map<String, String>> v = publishAndAwait("shared.yaml",
        "demo:\n  shared: shared-v2\n  overridden: from-shared-v2\n",
        "shared", "shared-v2");
    for (String bean : new String[] {"refreshScope", "properties", "environment"}) {
      assertEquals("from-app-v1", v.get(bean).get("overridden"), bean + ": app.yaml still overrides shared.yaml");
      assertEquals("hello-v2", v.get(bean).get("greeting"), bean + " greeting unchanged");
    }
  }

  @Test
  @Order(5)
  void whenAppYamlDropsTheOverrideTheSharedValueShows() {
    publishAndAwait("app.yaml", "demo:\n  greeting: hello-v2\n", "overridden", "from-shared-v2");
  }

  @Test
  @Order(6)
  void aValueRemovedFromSharedYamlIsGoneFromTheEnvironment() {
    Map<String, Map<String, String>> v = publishAndAwait("shared.yaml", "demo:\n  shared: shared-v3\n",
        "shared", "shared-v3");
    assertEquals("unset", v.get("environment").get("overridden"), "environment: demo.overridden removed");
    assertEquals("unset", v.get("refreshScope").get("overridden"), "@RefreshScope bean: default again");
    // Spring Cloud rebinds a JavaBean @ConfigurationProperties bean in place: a key that no
    // longer exists calls no setter, so the bean keeps the value it had (Spring's behaviour,
    // the same against Nacos).
    assertEquals("from-shared-v2", v.get("properties").get("overridden"),
        "@ConfigurationProperties bean keeps its last bound value for a removed key");
  }

  @Test
  @Order(7)
  void aConfigPublishedAfterStartupForAnOptionalImportAppears() {
    publishAndAwait("late.yaml", "demo:\n  late: arrived\n", "late", "arrived");
  }

  @Test
  @Order(8)
  void scaRecordedOneRefreshPerPublishWithTheServersMd5() {
    // SCA's /actuator/nacosconfig keeps each refresh, newest first, with the md5 of the
    // content the client received: one per publish above, each the md5 of what was
    // published, which is also what the server sends as Content-MD5.
    Map<String, Object> endpoint = getJson("/actuator/nacosconfig");
    @SuppressWarnings("unchecked")
    List<Map<String, Object>> history = (List<Map<String, Object>>) endpoint.get("RefreshHistory");
    List<String> recorded = new ArrayList<>();
    for (Map<String, Object> r : history) {
      recorded.add(0, r.get("dataId") + " " + r.get("md5"));
    }
    List<String> expected = new ArrayList<>();
    Map<String, String> current = new LinkedHashMap<>();
    for (String[] p : sca.published) {
      expected.add(p[0] + " " + md5(p[1]));
      current.put(p[0], md5(p[1]));
    }
    assertEquals(expected, recorded, "SCA refresh history (oldest first): " + history);
    current.forEach((dataId, md5) -> assertEquals(md5,
        sca.nacelle.getResult("", dataId, groupOf(dataId), Map.of()).header("Content-MD5"), dataId + " Content-MD5"));
  }

  @Test
  @Order(9)
  void afterANacelleRestartTheAppFollowsPublishesAgain() {
    // Same ports and data directory (the token secret with it): the client reconnects by
    // itself and listens again.
    long t0 = System.nanoTime();
    sca.nacelle.restart();
    System.out.printf("[sca] nacelle restarted in %d ms%n", (System.nanoTime() - t0) / 1_000_000);
    publishAndAwait("app.yaml", "demo:\n  greeting: hello-after-restart\n", "greeting", "hello-after-restart");
  }

  private Map<String, Map<String, String>> values() {
    return sca.values();
  }

  private <T> T getJson(String path) {
    return sca.getJson(path);
  }

  private Map<String, Map<String, String>> publishAndAwait(String dataId, String content, String key, String expected) {
    return sca.publishAndAwait("", dataId, groupOf(dataId), content, key, expected);
  }

  private static String groupOf(String dataId) {
    return dataId.equals("shared.yaml") ? SHARED_GROUP : GROUP;
  }
}
