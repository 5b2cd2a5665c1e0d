package io.nacelle.compat.sca;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.nacelle.compat.harness.Await;
import io.nacelle.compat.harness.NacelleServer;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.web.context.WebServerApplicationContext;
import org.springframework.context.ConfigurableApplicationContext;

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
  /** Bound on every wait for a published value; the delay itself is measured and printed. */
  private static final Duration DEADLINE = Duration.ofSeconds(30);

  private final ObjectMapper json = new ObjectMapper();
  private final HttpClient http = HttpClient.newHttpClient();
  private NacelleServer nacelle;
  private ConfigurableApplicationContext app;
  private URI baseUri;
  /** (dataId, content) of each publish made after the app started, in order. */
  private final List<String[]> publishedAfterStart = new ArrayList<>();

  @BeforeAll
  void start() {
    // --slow-request-ms 0: every request in the log with its route (the wire trace of the app).
    nacelle = NacelleServer.builder().name("sca").auth(true).args("--slow-request-ms", "0").start();
    // The app runs as production apps do: its own user, with read permission only.
    admin("POST", "/nacos/v1/auth/users", Map.of("username", APP_USER, "password", APP_PASSWORD));
    admin("POST", "/nacos/v1/auth/roles", Map.of("role", "sca-reader", "username", APP_USER));
    admin("POST", "/nacos/v1/auth/permissions", Map.of("role", "sca-reader", "resource", ":*:*", "action", "r"));

    nacelle.publish("", "shared.yaml", SHARED_GROUP, "demo:\n  shared: shared-v1\n  overridden: from-shared-v1\n",
        Map.of("type", "yaml"), Map.of());
    nacelle.publish("", "app.yaml", GROUP, "demo:\n  greeting: hello-v1\n  overridden: from-app-v1\n",
        Map.of("type", "yaml"), Map.of());

    long t0 = System.nanoTime();
    app = new SpringApplicationBuilder(ScaCompatApplication.class)
        .run(
            "--server.port=0", // RANDOM_PORT
            "--spring.cloud.nacos.config.server-addr=" + nacelle.serverAddr(),
            "--spring.cloud.nacos.config.username=" + APP_USER,
            "--spring.cloud.nacos.config.password=" + APP_PASSWORD);
    int port = ((WebServerApplicationContext) app).getWebServer().getPort();
    baseUri = URI.create("http://127.0.0.1:" + port);
    System.out.printf("[sca] app started in %d ms, nacelle %s, app on port %d%n",
        (System.nanoTime() - t0) / 1_000_000, nacelle.serverAddr(), port);
  }

  @AfterAll
  void stop() {
    if (app != null) {
      app.close();
    }
    if (nacelle != null) {
      nacelle.close();
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
    for (String[] p : publishedAfterStart) {
      expected.add(p[0] + " " + md5(p[1]));
      current.put(p[0], md5(p[1]));
    }
    assertEquals(expected, recorded, "SCA refresh history (oldest first): " + history);
    current.forEach((dataId, md5) -> assertEquals(md5,
        nacelle.getResult("", dataId, groupOf(dataId), Map.of()).header("Content-MD5"), dataId + " Content-MD5"));
  }

  @Test
  @Order(9)
  void afterANacelleRestartTheAppFollowsPublishesAgain() {
    // Same ports and data directory (the token secret with it): the client reconnects by
    // itself and listens again.
    long t0 = System.nanoTime();
    nacelle.restart();
    System.out.printf("[sca] nacelle restarted in %d ms%n", (System.nanoTime() - t0) / 1_000_000);
    publishAndAwait("app.yaml", "demo:\n  greeting: hello-after-restart\n", "greeting", "hello-after-restart");
  }

  // ---- helpers ---------------------------------------------------------------------------

  /**
   * Publishes {@code content} as {@code dataId} and polls /values until {@code key} is
   * {@code expected} in both beans (harness {@link Await}, deadline {@link #DEADLINE}); prints each bean's delay
   * from the publish call to the first answer serving the value. Returns that answer.
   */
  private Map<String, Map<String, String>> publishAndAwait(String dataId, String content, String key, String expected) {
    long t0 = System.nanoTime();
    nacelle.publish("", dataId, groupOf(dataId), content, Map.of("type", "yaml"), Map.of());
    publishedAfterStart.add(new String[] {dataId, content});
    long published = System.nanoTime();
    Map<String, Long> seen = new LinkedHashMap<>();
    AtomicReference<Map<String, Map<String, String>>> last = new AtomicReference<>();
    String what = "demo." + key + " = " + expected + " in both beans after publishing " + dataId;
    try {
      Await.until(DEADLINE, what, () -> {
        Map<String, Map<String, String>> v = values();
        long now = System.nanoTime();
        last.set(v);
        for (String bean : new String[] {"refreshScope", "properties"}) {
          if (!seen.containsKey(bean) && expected.equals(v.get(bean).get(key))) {
            seen.put(bean, now);
          }
        }
        return seen.size() == 2;
      });
    } catch (AssertionError e) {
      throw new AssertionError(e.getMessage() + "; last /values: " + last.get(), e);
    }
    System.out.printf("[sca] publish %s (demo.%s=%s): HTTP publish took %d ms; served by @RefreshScope after %d ms,"
            + " by @ConfigurationProperties after %d ms%n",
        dataId, key, expected, (published - t0) / 1_000_000,
        (seen.get("refreshScope") - t0) / 1_000_000, (seen.get("properties") - t0) / 1_000_000);
    return last.get();
  }

  private Map<String, Map<String, String>> values() {
    return getJson("/values");
  }

  private <T> T getJson(String path) {
    URI uri = baseUri.resolve(path);
    try {
      HttpResponse<String> r = http.send(HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(10)).build(),
          HttpResponse.BodyHandlers.ofString());
      assertEquals(200, r.statusCode(), "GET " + path + ": " + r.body());
      return json.readValue(r.body(), new TypeReference<T>() {});
    } catch (IOException e) {
      throw new AssertionError("GET " + uri + " failed", e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError(e);
    }
  }

  private static String groupOf(String dataId) {
    return dataId.equals("shared.yaml") ? SHARED_GROUP : GROUP;
  }

  private static String md5(String content) {
    try {
      return HexFormat.of().formatHex(
          MessageDigest.getInstance("MD5").digest(content.getBytes(StandardCharsets.UTF_8)));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  private void admin(String method, String path, Map<String, String> form) {
    NacelleServer.HttpResult r = nacelle.http(method, path, Map.of(), form, Map.of());
    if (r.status() != 200) {
      throw new IllegalStateException(method + " " + path + " " + form.keySet() + ": " + r.status() + " " + r.body());
    }
  }
}
