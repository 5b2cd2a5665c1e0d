package io.nacelle.compat.harness;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.StringJoiner;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * One real nacelle process, started from the binary named by the environment variable {@code
 * NACELLE_BIN}, with its own temporary data directory, bound to 127.0.0.1.
 *
 * <pre>{@code
 * try (NacelleServer s = NacelleServer.builder().auth(false).start()) {
 *   s.publish("app.yaml", "DEFAULT_GROUP", "a: 1");
 *   // point a client at s.serverAddr()
 * }
 * }</pre>
 *
 * <p>Ports: HTTP in 20000–31000, gRPC = HTTP + 1000 (what Java clients derive), cluster gRPC =
 * HTTP + 1001; all three checked free before start, and the start retried on fresh ports if
 * nacelle still reports "Address already in use". stdout and stderr go to a log file under
 * {@code target/nacelle-logs} (system property {@code nacelle.logDir}); {@link #logTail(int)}
 * reads it, and it is printed when a start fails. Every process is killed by a JVM shutdown hook
 * as well.
 */
public final class NacelleServer implements AutoCloseable {
  public static final String ADMIN_USERNAME = "nacos";

  private static final Set<Process> LIVE = ConcurrentHashMap.newKeySet();
  static final List<NacelleServer> CREATED = new CopyOnWriteArrayList<>();

  static {
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  for (Process p : LIVE) {
                    p.destroyForcibly();
                  }
                },
                "nacelle-harness-kill"));
  }

  private static final HttpClient HTTP =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();

  private final String name;
  private final boolean auth;
  private final List<String> extraArgs;
  private final Map<String, String> env;
  private final Path dataDir;
  private final boolean ownDataDir;
  private final String adminPassword;
  private final Duration readyTimeout;
  private final Path logFile;
  private int httpPort;
  private Process process;
  private volatile String token;
  private volatile long tokenRenewAt;

  private NacelleServer(Builder b, int httpPort) throws IOException {
    this.name = b.name;
    this.auth = b.auth;
    this.extraArgs = List.copyOf(b.args);
    this.env = Map.copyOf(b.env);
    this.ownDataDir = b.dataDir == null;
    this.dataDir = b.dataDir != null ? b.dataDir : Files.createTempDirectory("nacelle-" + b.name + "-");
    this.adminPassword =
        b.adminPassword != null ? b.adminPassword : "Pw-" + Long.toHexString(ThreadLocalRandom.current().nextLong());
    this.readyTimeout = b.readyTimeout;
    Path logDir = Paths.get(System.getProperty("nacelle.logDir", "target/nacelle-logs"));
    Files.createDirectories(logDir);
    this.logFile =
        logDir.resolve(
            b.name + "-" + Instant.now().toEpochMilli() + "-" + ThreadLocalRandom.current().nextInt(1000, 9999) + ".log");
    this.httpPort = httpPort;
  }

  public static Builder builder() {
    return new Builder();
  }

  /** The nacelle binary: env {@code NACELLE_BIN}. Fails clearly when unset or not executable. */
  public static Path binary() {
    String bin = System.getenv("NACELLE_BIN");
    if (bin == null || bin.isBlank()) {
      throw new IllegalStateException(
          "NACELLE_BIN is not set: build the server (cargo build -p nacelle) and run e.g. "
              + "NACELLE_BIN=/work/main/target/debug/nacelle mvn -B -f compat/java/pom.xml test");
    }
    Path p = Paths.get(bin);
    if (!Files.isExecutable(p)) {
      throw new IllegalStateException("NACELLE_BIN=" + bin + " is not an executable file");
    }
    return p;
  }

  public static final class Builder {
    private String name = "nacelle";
    private boolean auth = true;
    private final List<String> args = new ArrayList<>();
    private final Map<String, String> env = new LinkedHashMap<>();
    private Path dataDir;
    private Integer httpPort;
    private String adminPassword;
    private Duration readyTimeout = Duration.ofSeconds(60);

    /** Name used for the data dir, the log file and messages. */
    public Builder name(String name) {
      this.name = name;
      return this;
    }

    /** Authentication on (default, nacelle's default) or {@code --auth off}. */
    public Builder auth(boolean on) {
      this.auth = on;
      return this;
    }

    /** Extra command-line arguments after {@code serve}. */
    public Builder args(String... more) {
      args.addAll(List.of(more));
      return this;
    }

    /** An environment variable for the process (all inherited {@code NACELLE_*} are removed). */
    public Builder env(String key, String value) {
      env.put(key, value);
      return this;
    }

    /** Use this data directory (kept on close) instead of a fresh temporary one (deleted). */
    public Builder dataDir(Path dir) {
      this.dataDir = dir;
      return this;
    }

    /** A fixed HTTP port (no retry on "Address already in use"). */
    public Builder httpPort(int port) {
      this.httpPort = port;
      return this;
    }

    /** Password of the admin {@code nacos} created at first start (default: random). */
    public Builder adminPassword(String password) {
      this.adminPassword = password;
      return this;
    }

    public Builder readyTimeout(Duration timeout) {
      this.readyTimeout = timeout;
      return this;
    }

    /** Starts the server and waits until it is ready. */
    public NacelleServer start() {
      binary();
      int attempts = httpPort != null ? 1 : 8;
      IllegalStateException last = null;
      for (int i = 0; i < attempts; i++) {
        int port = httpPort != null ? httpPort : Ports.pickHttpPort();
        NacelleServer s;
        try {
          s = new NacelleServer(this, port);
        } catch (IOException e) {
          throw new UncheckedIOException(e);
        }
        CREATED.add(s);
        try {
          s.startProcess();
          return s;
        } catch (AddressInUse e) {
          System.err.println("[harness] " + name + ": port " + port + " taken, retrying on fresh ports");
          s.close();
          last = e;
        }
      }
      throw new IllegalStateException("could not start " + name + " after " + attempts + " attempts", last);
    }
  }

  /** Raised when nacelle exits because a port is taken. */
  public static final class AddressInUse extends IllegalStateException {
    AddressInUse(String msg) {
      super(msg);
    }
  }

  private List<String> command() {
    List<String> cmd = new ArrayList<>();
    cmd.add(binary().toString());
    cmd.add("serve");
    cmd.add("--bind");
    cmd.add("127.0.0.1");
    cmd.add("--port");
    cmd.add(Integer.toString(httpPort));
    cmd.add("--data-dir");
    cmd.add(dataDir.toString());
    cmd.add("--auth");
    cmd.add(auth ? "on" : "off");
    cmd.addAll(extraArgs);
    return cmd;
  }

  private synchronized void startProcess() {
    if (process != null && process.isAlive()) {
      throw new IllegalStateException(name + " is already running");
    }
    long logOffset;
    try {
      logOffset = Files.exists(logFile) ? Files.size(logFile) : 0;
      Files.writeString(
          logFile,
          "[harness] " + Instant.now() + " starting: " + String.join(" ", command()) + "\n",
          StandardCharsets.UTF_8,
          java.nio.file.StandardOpenOption.CREATE,
          java.nio.file.StandardOpenOption.APPEND);
      ProcessBuilder pb = new ProcessBuilder(command());
      // Inherited NACELLE_* settings would change what is tested; only the log filter and the
      // slow-request threshold (debugging aids) pass through.
      pb.environment()
          .keySet()
          .removeIf(k -> k.startsWith("NACELLE_") && !k.equals("NACELLE_LOG") && !k.equals("NACELLE_SLOW_REQUEST_MS"));
      if (auth) {
        pb.environment().put("NACELLE_ADMIN_PASSWORD", adminPassword);
      }
      pb.environment().putAll(env);
      pb.redirectErrorStream(true);
      pb.redirectOutput(ProcessBuilder.Redirect.appendTo(logFile.toFile()));
      process = pb.start();
      LIVE.add(process);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot start " + name, e);
    }
    token = null;
    long deadline = System.nanoTime() + readyTimeout.toNanos();
    while (System.nanoTime() < deadline) {
      if (!process.isAlive()) {
        String log = logSince(logOffset);
        LIVE.remove(process);
        if (log.toLowerCase().contains("address already in use") || log.contains("os error 98")) {
          throw new AddressInUse(name + " could not bind port " + httpPort + "/" + grpcPort() + ": " + lastLines(log, 5));
        }
        printLogTail(60);
        throw new IllegalStateException(name + " exited with " + process.exitValue() + " during start; log: " + logFile);
      }
      if (isReady()) {
        return;
      }
      sleep(50);
    }
    printLogTail(60);
    process.destroyForcibly();
    throw new IllegalStateException(name + " not ready within " + readyTimeout + "; log: " + logFile);
  }

  /** GET /nacos/v1/console/health/readiness answers 200. */
  public boolean isReady() {
    try {
      HttpResponse<String> r =
          HTTP.send(
              HttpRequest.newBuilder(URI.create(baseUrl() + "/nacos/v1/console/health/readiness"))
                  .timeout(Duration.ofSeconds(2))
                  .GET()
                  .build(),
              HttpResponse.BodyHandlers.ofString());
      return r.statusCode() == 200;
    } catch (IOException e) {
      return false;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  /** Waits until ready (e.g. after starting it elsewhere). */
  public void waitReady(Duration timeout) {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (System.nanoTime() < deadline) {
      if (isReady()) {
        return;
      }
      sleep(50);
    }
    printLogTail(60);
    throw new IllegalStateException(name + " not ready within " + timeout);
  }

  // ---- lifecycle -------------------------------------------------------------------------

  /** Graceful stop: SIGTERM, wait up to 15 s, then SIGKILL. */
  public synchronized void stop() {
    if (process == null) {
      return;
    }
    process.destroy();
    try {
      if (!process.waitFor(15, TimeUnit.SECONDS)) {
        System.err.println("[harness] " + name + " ignored SIGTERM for 15 s; killing");
        process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    LIVE.remove(process);
  }

  /** SIGKILL, waits for the exit. */
  public synchronized void kill() {
    if (process == null) {
      return;
    }
    try {
      process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    LIVE.remove(process);
  }

  /** Starts again after {@link #stop()} or {@link #kill()}: same ports, same data dir. */
  public synchronized void start() {
    IllegalStateException last = null;
    for (int i = 0; i < 20; i++) {
      try {
        startProcess();
        return;
      } catch (AddressInUse e) {
        last = e;
        sleep(250);
      }
    }
    throw last;
  }

  /** {@link #stop()} then {@link #start()}. */
  public void restart() {
    stop();
    start();
  }

  public synchronized boolean isRunning() {
    return process != null && process.isAlive();
  }

  public synchronized long pid() {
    return process == null ? -1 : process.pid();
  }

  /** Kills the process; deletes the data dir when the harness created it. Log files stay. */
  @Override
  public void close() {
    kill();
    if (ownDataDir) {
      deleteTree(dataDir);
    }
  }

  // ---- facts -----------------------------------------------------------------------------

  public String name() {
    return name;
  }

  public int httpPort() {
    return httpPort;
  }

  /** Client gRPC port = HTTP + 1000 (Java clients derive it so). */
  public int grpcPort() {
    return httpPort + 1000;
  }

  /** Member-to-member gRPC port = HTTP + 1001. */
  public int clusterGrpcPort() {
    return httpPort + 1001;
  }

  /** {@code 127.0.0.1:<httpPort>}, for a client's serverAddr. */
  public String serverAddr() {
    return "127.0.0.1:" + httpPort;
  }

  public String baseUrl() {
    return "http://127.0.0.1:" + httpPort;
  }

  public boolean authEnabled() {
    return auth;
  }

  /** Admin user name ({@code nacos}) when auth is on, else null. */
  public String username() {
    return auth ? ADMIN_USERNAME : null;
  }

  /** Admin password when auth is on, else null. */
  public String password() {
    return auth ? adminPassword : null;
  }

  public Path dataDir() {
    return dataDir;
  }

  public Path logFile() {
    return logFile;
  }

  // ---- logs ------------------------------------------------------------------------------

  /** The last {@code lines} lines of this server's log (stdout + stderr). */
  public String logTail(int lines) {
    try {
      return lastLines(Files.readString(logFile, StandardCharsets.UTF_8), lines);
    } catch (IOException e) {
      return "(no log: " + e + ")";
    }
  }

  public void printLogTail(int lines) {
    System.err.println("----- last " + lines + " lines of " + name + " (" + logFile + ") -----");
    System.err.println(logTail(lines));
    System.err.println("----- end of " + name + " -----");
  }

  private String logSince(long offset) {
    try {
      byte[] all = Files.readAllBytes(logFile);
      int from = (int) Math.min(offset, all.length);
      return new String(all, from, all.length - from, StandardCharsets.UTF_8);
    } catch (IOException e) {
      return "";
    }
  }

  private static String lastLines(String text, int lines) {
    String[] all = text.split("\n", -1);
    int from = Math.max(0, all.length - lines - 1);
    return String.join("\n", java.util.Arrays.asList(all).subList(from, all.length));
  }

  // ---- HTTP v1 operations for the test side -------------------------------------------------

  /** Result of an HTTP call. */
  public record HttpResult(int status, String body, Map<String, List<String>> headers) {
    public String header(String name) {
      for (Map.Entry<String, List<String>> e : headers.entrySet()) {
        if (e.getKey().equalsIgnoreCase(name) && !e.getValue().isEmpty()) {
          return e.getValue().get(0);
        }
      }
      return null;
    }
  }

  /** Logs in as the admin and returns the access token (cached until restart). */
  public String accessToken() {
    if (!auth) {
      return null;
    }
    String t = token;
    if (t != null && System.nanoTime() < tokenRenewAt) {
      return t;
    }
    HttpResult r = loginAnswer(ADMIN_USERNAME, adminPassword);
    Matcher ttl = Pattern.compile("\"tokenTtl\"\\s*:\\s*(\\d+)").matcher(r.body());
    long ttlSeconds = ttl.find() ? Long.parseLong(ttl.group(1)) : 18_000;
    // renew at 80 % of the lifetime, as clients do well before expiry
    tokenRenewAt = System.nanoTime() + TimeUnit.SECONDS.toNanos(ttlSeconds) * 8 / 10;
    token = accessTokenOf(r);
    return token;
  }

  /** Logs in as {@code username} (POST /nacos/v1/auth/login) and returns its access token. */
  public String login(String username, String password) {
    return accessTokenOf(loginAnswer(username, password));
  }

  private HttpResult loginAnswer(String username, String password) {
    Map<String, String> form = new LinkedHashMap<>();
    form.put("username", username);
    form.put("password", password);
    HttpResult r = send("POST", "/nacos/v1/auth/login", Map.of(), form, Map.of(), false);
    if (r.status() != 200) {
      throw new IllegalStateException("login of " + username + " to " + name + " failed: " + r.status() + " " + r.body());
    }
    return r;
  }

  private static String accessTokenOf(HttpResult r) {
    Matcher m = Pattern.compile("\"accessToken\"\\s*:\\s*\"([^\"]+)\"").matcher(r.body());
    if (!m.find()) {
      throw new IllegalStateException("no accessToken in login answer: " + r.body());
    }
    return m.group(1);
  }

  /**
   * Any HTTP call. {@code query} goes to the URL, {@code form} (when not empty) to an
   * x-www-form-urlencoded body. With auth on the admin's access token is added.
   */
  public HttpResult http(
      String method, String path, Map<String, String> query, Map<String, String> form, Map<String, String> headers) {
    return send(method, path, query, form, headers, auth);
  }

  /**
   * An HTTP call as another user: {@code token} (from {@link #login}) goes as the {@code
   * accessToken} parameter, {@code form} (when not empty) as an x-www-form-urlencoded body.
   */
  public HttpResult httpAs(String token, String method, String path, Map<String, String> query, Map<String, String> form) {
    Map<String, String> q = new LinkedHashMap<>(query);
    q.put("accessToken", token);
    return send(method, path, q, form, Map.of(), false);
  }

  /** An HTTP call as another user with a JSON body ({@code Content-Type: application/json}). */
  public HttpResult jsonAs(String token, String method, String path, Map<String, String> query, String json) {
    Map<String, String> q = new LinkedHashMap<>(query);
    q.put("accessToken", token);
    return exchange(method, path, q, "application/json", json, Map.of());
  }

  private HttpResult send(
      String method,
      String path,
      Map<String, String> query,
      Map<String, String> form,
      Map<String, String> headers,
      boolean withToken) {
    Map<String, String> q = new LinkedHashMap<>(query);
    if (withToken) {
      q.put("accessToken", accessToken());
    }
    return form.isEmpty()
        ? exchange(method, path, q, null, null, headers)
        : exchange(method, path, q, "application/x-www-form-urlencoded; charset=UTF-8", encode(form), headers);
  }

  private HttpResult exchange(
      String method, String path, Map<String, String> q, String contentType, String body, Map<String, String> headers) {
    String url = baseUrl() + path + (q.isEmpty() ? "" : "?" + encode(q));
    HttpRequest.Builder rb = HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(30));
    headers.forEach(rb::header);
    if (body != null) {
      rb.header("Content-Type", contentType);
      rb.method(method, HttpRequest.BodyPublishers.ofString(body, StandardCharsets.UTF_8));
    } else {
      rb.method(method, HttpRequest.BodyPublishers.noBody());
    }
    try {
      HttpResponse<String> r = HTTP.send(rb.build(), HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
      return new HttpResult(r.statusCode(), r.body(), r.headers().map());
    } catch (IOException e) {
      throw new UncheckedIOException(method + " " + url + " failed", e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  public static String encode(Map<String, String> params) {
    StringJoiner j = new StringJoiner("&");
    params.forEach(
        (k, v) -> j.add(URLEncoder.encode(k, StandardCharsets.UTF_8) + "=" + URLEncoder.encode(v, StandardCharsets.UTF_8)));
    return j.toString();
  }

  /** POST /nacos/v1/cs/configs in the default namespace; throws unless the answer is {@code true}. */
  public void publish(String dataId, String group, String content) {
    publish("", dataId, group, content, Map.of(), Map.of());
  }

  /**
   * POST /nacos/v1/cs/configs. {@code extra} adds form fields (type, appName, tag…), {@code
   * headers} request headers (e.g. {@code betaIps}). Throws unless the answer is {@code true}.
   */
  public void publish(
      String tenant, String dataId, String group, String content, Map<String, String> extra, Map<String, String> headers) {
    Map<String, String> form = new LinkedHashMap<>();
    form.put("dataId", dataId);
    form.put("group", group);
    if (tenant != null && !tenant.isEmpty()) {
      form.put("tenant", tenant);
    }
    form.put("content", content);
    form.putAll(extra);
    HttpResult r = http("POST", "/nacos/v1/cs/configs", Map.of(), form, headers);
    if (r.status() != 200 || !"true".equals(r.body().trim())) {
      throw new IllegalStateException("publish " + dataId + " to " + name + " failed: " + r.status() + " " + r.body());
    }
  }

  /** GET /nacos/v1/cs/configs; null when 404. */
  public String get(String dataId, String group) {
    return get("", dataId, group);
  }

  /** GET /nacos/v1/cs/configs; null when 404. */
  public String get(String tenant, String dataId, String group) {
    HttpResult r = getResult(tenant, dataId, group, Map.of());
    if (r.status() == 404) {
      return null;
    }
    if (r.status() != 200) {
      throw new IllegalStateException("get " + dataId + " from " + name + " failed: " + r.status() + " " + r.body());
    }
    return r.body();
  }

  /** GET /nacos/v1/cs/configs with extra query parameters, the whole answer. */
  public HttpResult getResult(String tenant, String dataId, String group, Map<String, String> extraQuery) {
    Map<String, String> q = new LinkedHashMap<>();
    q.put("dataId", dataId);
    q.put("group", group);
    if (tenant != null && !tenant.isEmpty()) {
      q.put("tenant", tenant);
    }
    q.putAll(extraQuery);
    return http("GET", "/nacos/v1/cs/configs", q, Map.of(), Map.of());
  }

  /** DELETE /nacos/v1/cs/configs. */
  public void delete(String dataId, String group) {
    delete("", dataId, group);
  }

  /** DELETE /nacos/v1/cs/configs; throws unless the answer is {@code true}. */
  public void delete(String tenant, String dataId, String group) {
    Map<String, String> q = new LinkedHashMap<>();
    q.put("dataId", dataId);
    q.put("group", group);
    if (tenant != null && !tenant.isEmpty()) {
      q.put("tenant", tenant);
    }
    HttpResult r = http("DELETE", "/nacos/v1/cs/configs", q, Map.of(), Map.of());
    if (r.status() != 200 || !"true".equals(r.body().trim())) {
      throw new IllegalStateException("delete " + dataId + " on " + name + " failed: " + r.status() + " " + r.body());
    }
  }

  /** POST /nacos/v1/console/namespaces (customNamespaceId, namespaceName). */
  public void createNamespace(String id, String displayName) {
    Map<String, String> form = new LinkedHashMap<>();
    form.put("customNamespaceId", id);
    form.put("namespaceName", displayName);
    form.put("namespaceDesc", "created by the Java compat harness");
    HttpResult r = http("POST", "/nacos/v1/console/namespaces", Map.of(), form, Map.of());
    if (r.status() != 200 || !"true".equals(r.body().trim())) {
      throw new IllegalStateException("create namespace " + id + " on " + name + " failed: " + r.status() + " " + r.body());
    }
  }

  // ---- helpers ---------------------------------------------------------------------------

  static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  static void deleteTree(Path dir) {
    if (dir == null || !Files.exists(dir)) {
      return;
    }
    try (Stream<Path> walk = Files.walk(dir)) {
      List<Path> paths = new ArrayList<>(walk.toList());
      paths.sort(Comparator.reverseOrder());
      for (Path p : paths) {
        Files.deleteIfExists(p);
      }
    } catch (IOException e) {
      System.err.println("[harness] could not delete " + dir + ": " + e);
    }
  }

  /** Servers created in this JVM (for log dumps on failure). */
  public static List<NacelleServer> created() {
    return Collections.unmodifiableList(CREATED);
  }

  @Override
  public String toString() {
    return name + "@" + serverAddr();
  }
}
