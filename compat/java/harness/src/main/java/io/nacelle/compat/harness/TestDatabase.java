package io.nacelle.compat.harness;

import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

/**
 * A uniquely named, empty database on the test server named by {@code
 * NACELLE_TEST_POSTGRES_URL} (preferred) or {@code NACELLE_TEST_MYSQL_URL}, created with the
 * {@code psql} / {@code mysql} command-line clients and dropped on close. When neither variable
 * is set {@link #create()} fails and says how to set one: tests that need a database must not be
 * skipped silently.
 */
public final class TestDatabase implements AutoCloseable {
  private final String kind;
  private final String serverUrl;
  private final String name;

  private TestDatabase(String kind, String serverUrl, String name) {
    this.kind = kind;
    this.serverUrl = stripSlash(serverUrl);
    this.name = name;
  }

  public static TestDatabase create() {
    String pg = System.getenv("NACELLE_TEST_POSTGRES_URL");
    String my = System.getenv("NACELLE_TEST_MYSQL_URL");
    String name = "nacelle_java_" + Long.toHexString(System.currentTimeMillis()) + "_" + ThreadLocalRandom.current().nextInt(1000, 9999);
    TestDatabase db;
    if (pg != null && !pg.isBlank()) {
      db = new TestDatabase("postgres", pg, name);
    } else if (my != null && !my.isBlank()) {
      db = new TestDatabase("mysql", my, name);
    } else {
      throw new IllegalStateException(
          "This test needs a database server: run `eval \"$(bash scripts/test-databases.sh start)\"` in /work/main "
              + "(it exports NACELLE_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:PORT and "
              + "NACELLE_TEST_MYSQL_URL=mysql://root@127.0.0.1:PORT), then run Maven in that shell");
    }
    db.exec("CREATE DATABASE " + name);
    return db;
  }

  /** postgres or mysql. */
  public String kind() {
    return kind;
  }

  public String name() {
    return name;
  }

  /** URL of the database for nacelle's {@code --db}. */
  public String url() {
    return serverUrl + "/" + name;
  }

  @Override
  public void close() {
    try {
      exec(kind.equals("postgres") ? "DROP DATABASE IF EXISTS " + name + " WITH (FORCE)" : "DROP DATABASE IF EXISTS " + name);
    } catch (RuntimeException e) {
      System.err.println("[harness] could not drop database " + name + ": " + e.getMessage());
    }
  }

  private void exec(String sql) {
    List<String> cmd = new ArrayList<>();
    if (kind.equals("postgres")) {
      String u = serverUrl.replaceFirst("^postgres(ql)?://", "postgresql://");
      cmd.addAll(List.of("psql", "-v", "ON_ERROR_STOP=1", "-X", "-q", "-d", u + "/postgres", "-c", sql));
    } else {
      URI uri = URI.create(serverUrl);
      cmd.addAll(List.of("mysql", "-h", uri.getHost(), "-P", Integer.toString(uri.getPort() < 0 ? 3306 : uri.getPort()), "--protocol=TCP"));
      String ui = uri.getUserInfo();
      if (ui != null) {
        int c = ui.indexOf(':');
        cmd.add("-u" + (c < 0 ? ui : ui.substring(0, c)));
        if (c >= 0) {
          cmd.add("--password=" + ui.substring(c + 1));
        }
      }
      cmd.addAll(List.of("-e", sql));
    }
    try {
      Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
        throw new IllegalStateException(cmd.get(0) + " failed on `" + sql + "`: " + out);
      }
    } catch (IOException e) {
      throw new IllegalStateException("cannot run " + cmd.get(0) + " (is the client installed?)", e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  private static String stripSlash(String s) {
    String t = s.trim();
    while (t.endsWith("/")) {
      t = t.substring(0, t.length() - 1);
    }
    return t;
  }
}
