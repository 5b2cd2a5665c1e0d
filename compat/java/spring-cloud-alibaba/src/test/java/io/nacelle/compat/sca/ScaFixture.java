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
import java.util.concurrent.atomic.AtomicReference;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.web.context.WebServerApplicationContext;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * One nacelle (auth on) and the SCA app of this module pointed at it, for a test class.
 *
 * <p>One app per JVM: SCA keeps the Nacos {@code ConfigService} in a static field of
 * {@code NacosConfigManager}, so a second app in the same JVM would reuse the first one's
 * (its server address and credentials). Surefire runs each test class in a JVM of its own.
 */
final class ScaFixture implements AutoCloseable {

  /** Bound on every wait for a published value; the delay itself is measured and printed. */
  static final Duration DEADLINE = Duration.ofSeconds(30);

  final NacelleServer nacelle;
  /** (dataId, content) of each publish made through {@link #publishAndAwait}, in order. */
  final List<String[]> published = new ArrayList<>();
  private final ObjectMapper json = new ObjectMapper();
  private final HttpClient http = HttpClient.newHttpClient();
  private ConfigurableApplicationContext app;
  private URI baseUri;

  private ScaFixture(NacelleServer nacelle) {
    this.nacelle = nacelle;
  }

  /** A nacelle with authentication on, logging every request with its route (the app's wire trace). */
  static ScaFixture start(String name) {
    return new ScaFixture(
        NacelleServer.builder().name(name).auth(true).args("--slow-request-ms", "0").start());
  }

  /** A user with one role that may do {@code action} on {@code resource} (as production apps run). */
  void createUser(String username, String password, String resource, String action) {
    String role = username + "-role";
    admin("/nacos/v1/auth/users", Map.of("username", username, "password", password));
    admin("/nacos/v1/auth/roles", Map.of("role", role, "username", username));
    admin("/nacos/v1/auth/permissions", Map.of("role", role, "resource", resource, "action", action));
  }

  private void admin(String path, Map<String, String> form) {
    NacelleServer.HttpResult r = nacelle.http("POST", path, Map.of(), form, Map.of());
    if (r.status() != 200) {
      throw new IllegalStateException("POST " + path + " " + form.keySet() + ": " + r.status() + " " + r.body());
    }
  }

  /** POST a yaml config; {@code tenant} "" is the default namespace. */
  void publish(String tenant, String dataId, String group, String content) {
    nacelle.publish(tenant, dataId, group, content, Map.of("type", "yaml"), Map.of());
  }

  /**
   * Starts the app on a random port against this nacelle with these credentials; {@code
   * more} are further command-line properties ({@code --key=value}).
   */
  void startApp(String username, String password, String... more) {
    app = app(username, password, more);
    int port = ((WebServerApplicationContext) app).getWebServer().getPort();
    baseUri = URI.create("http://127.0.0.1:" + port);
  }

  /** Runs the app (throws when it cannot start); the caller owns the context. */
  ConfigurableApplicationContext app(String username, String password, String... more) {
    List<String> args = new ArrayList<>(List.of(
        "--server.port=0", // RANDOM_PORT
        "--spring.cloud.nacos.config.server-addr=" + nacelle.serverAddr(),
        "--spring.cloud.nacos.config.username=" + username,
        "--spring.cloud.nacos.config.password=" + password));
    args.addAll(List.of(more));
    long t0 = System.nanoTime();
    ConfigurableApplicationContext started =
        new SpringApplicationBuilder(ScaCompatApplication.class).run(args.toArray(String[]::new));
    System.out.printf("[sca] app started in %d ms against nacelle %s%n", (System.nanoTime() - t0) / 1_000_000,
        nacelle.serverAddr());
    return started;
  }

  /** GET /values: {"refreshScope": {…}, "properties": {…}, "environment": {…}}. */
  Map<String, Map<String, String>> values() {
    return getJson("/values");
  }

  <T> T getJson(String path) {
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

  /**
   * Publishes {@code content} and polls /values (harness {@link Await}, deadline {@link
   * #DEADLINE}) until {@code demo.<key>} is {@code expected} in both beans; prints each
   * bean's delay from the publish call to the first answer serving the value. Returns that
   * answer.
   */
  Map<String, Map<String, String>> publishAndAwait(
      String tenant, String dataId, String group, String content, String key, String expected) {
    long t0 = System.nanoTime();
    publish(tenant, dataId, group, content);
    published.add(new String[] {dataId, content});
    long publishedAt = System.nanoTime();
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
        dataId, key, expected, (publishedAt - t0) / 1_000_000,
        (seen.get("refreshScope") - t0) / 1_000_000, (seen.get("properties") - t0) / 1_000_000);
    return last.get();
  }

  /** Lower-case hex MD5 of the UTF-8 bytes (Nacos's md5 of a config). */
  static String md5(String content) {
    try {
      return HexFormat.of().formatHex(
          MessageDigest.getInstance("MD5").digest(content.getBytes(StandardCharsets.UTF_8)));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  @Override
  public void close() {
    if (app != null) {
      app.close();
    }
    nacelle.close();
  }
}
