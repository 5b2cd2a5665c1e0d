package io.nacelle.compat.scenarios;

import static io.nacelle.compat.scenarios.Clients.WAIT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.alibaba.nacos.api.PropertyKeyConst;
import com.alibaba.nacos.api.config.ConfigService;
import com.alibaba.nacos.api.exception.NacosException;
import io.nacelle.compat.harness.Await;
import io.nacelle.compat.harness.NacelleLogOnFailure;
import io.nacelle.compat.harness.NacelleServer;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Callable;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A review policy (Nacelle's change requests, docs/http-api.md) on group {@code REVIEWED}: the
 * real client, logged in as the writer alice, cannot publish or remove a key of it directly;
 * a change request alice opens, bob (holding the review action {@code a}) approves and alice
 * publishes reaches her client's listener and {@code getConfig}.
 */
@ExtendWith(NacelleLogOnFailure.class)
class ReviewPolicyTest {
  static final String REVIEWED = "REVIEWED";
  static final String ALICE_PASSWORD = "Alice-Pass-123";
  static final String BOB_PASSWORD = "Bob-Pass-456";
  static NacelleServer server;

  @BeforeAll
  static void start() {
    server = NacelleServer.builder().name("review").auth(true).start();
    user("alice", ALICE_PASSWORD, "authors", "rw");
    user("bob", BOB_PASSWORD, "reviewers", "rwa");
  }

  @AfterAll
  static void stop() {
    if (server != null) {
      server.close();
    }
  }

  private static void user(String name, String password, String role, String action) {
    post("/nacos/v1/auth/users", Map.of("username", name, "password", password));
    post("/nacos/v1/auth/roles", Map.of("role", role, "username", name));
    post("/nacos/v1/auth/permissions", Map.of("role", role, "resource", "*:*:*", "action", action));
  }

  private static String post(String path, Map<String, String> form) {
    var r = server.http("POST", path, Map.of(), new LinkedHashMap<>(form), Map.of());
    assertEquals(200, r.status(), path + " " + form + ": " + r.body());
    return r.body();
  }

  /** POSTs {@code path?id=ID} as {@code token}; the answer's body, which must be a success. */
  private static String change(String token, String action, String id) {
    var r = server.httpAs(token, "POST", "/nacos/nacelle/v1/change/" + action, Map.of("id", id), Map.of());
    assertEquals(200, r.status(), action + ": " + r.body());
    assertTrue(r.body().contains("\"code\":0"), action + ": " + r.body());
    return r.body();
  }

  /** What a write of the client did: its return value, or the exception it threw. */
  private record Outcome(boolean done, NacosException thrown) {
    static Outcome of(Callable<Boolean> write) throws Exception {
      try {
        return new Outcome(write.call(), null);
      } catch (NacosException e) {
        return new Outcome(false, e);
      }
    }

    @Override
    public String toString() {
      return thrown == null ? "returned " + done : "threw errCode=" + thrown.getErrCode() + " " + thrown.getErrMsg();
    }
  }

  /** Whether a line of the client's own log files (JM.LOG.PATH) names {@code dataId} and {@code text}. */
  private static boolean clientLogged(String dataId, String text) {
    Path dir = Paths.get(System.getProperty("JM.LOG.PATH", "target/nacos-client-home/logs"));
    if (!Files.isDirectory(dir)) {
      return false;
    }
    try (Stream<Path> files = Files.walk(dir)) {
      return files
          .filter(Files::isRegularFile)
          .anyMatch(
              f -> {
                try {
                  return Files.readAllLines(f, StandardCharsets.UTF_8).stream()
                      .anyMatch(l -> l.contains("dataId=" + dataId + ",") && l.contains(text));
                } catch (IOException e) {
                  return false;
                }
              });
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  @Test
  void directWritesAreRefusedAndAReviewedChangeReachesTheListener() throws Exception {
    String id = Clients.uniq("reviewed") + ".yaml";
    server.publish(id, REVIEWED, "limit: 1");
    post(
        "/nacos/nacelle/v1/review-policies",
        Map.of("groupPattern", REVIEWED, "requiredApprovals", "1"));

    Properties p = Clients.props(server);
    p.setProperty(PropertyKeyConst.USERNAME, "alice");
    p.setProperty(PropertyKeyConst.PASSWORD, ALICE_PASSWORD);
    ConfigService alice = Clients.config(p);
    try {
      Clients.Recorder rec = new Clients.Recorder();
      alice.addListener(id, REVIEWED, rec);
      Await.until(WAIT, "the listener gets the current value (got " + rec.contents() + ")", () -> rec.received("limit: 1"));

      // Direct writes: refused by the server (gRPC errorCode 403). Observed with 2.5.1 and
      // 3.2.1: publishConfig and removeConfig return false, nothing thrown; the client logs
      // the publish's refusal with the server's message in config.log ("[publish-single]
      // fail, dataId=…, code=403, msg=config REVIEWED/… is under review policy 'REVIEWED'
      // …"), the remove's not at all.
      Outcome publish = Outcome.of(() -> alice.publishConfig(id, REVIEWED, "limit: 9"));
      System.out.println("[review] direct publishConfig " + publish);
      assertFalse(publish.done(), "a direct publish under a review policy");
      if (publish.thrown() != null) {
        assertEquals(NacosException.NO_RIGHT, publish.thrown().getErrCode(), publish.toString());
        assertTrue(publish.thrown().getErrMsg().contains("review policy"), publish.toString());
      }
      Outcome remove = Outcome.of(() -> alice.removeConfig(id, REVIEWED));
      System.out.println("[review] direct removeConfig " + remove);
      assertFalse(remove.done(), "a direct remove under a review policy");
      Outcome create = Outcome.of(() -> alice.publishConfig(id + ".new", REVIEWED, "new: 1"));
      assertFalse(create.done(), "a new key of the group is covered too: " + create);
      assertEquals("limit: 1", server.get(id, REVIEWED), "nothing was written");
      assertEquals(null, server.get(id + ".new", REVIEWED), "nothing was created");
      Await.until(WAIT, "the client logs the server's refusal naming the review policy", () -> clientLogged(id, "review policy"));
      // Another group is not covered.
      assertTrue(alice.publishConfig(id, "OPEN", "free: 1"), "a group without a policy");

      // The change request: alice opens it, bob approves, alice publishes.
      String aliceToken = server.login("alice", ALICE_PASSWORD);
      String bobToken = server.login("bob", BOB_PASSWORD);
      String body =
          "{\"title\":\"raise the limit\",\"items\":[{\"group\":\""
              + REVIEWED
              + "\",\"dataId\":\""
              + id
              + "\",\"content\":\"limit: 2\"}]}";
      var created = server.jsonAs(aliceToken, "POST", "/nacos/nacelle/v1/changes", Map.of(), body);
      assertEquals(200, created.status(), created.body());
      Matcher m = Pattern.compile("\"id\"\\s*:\\s*(\\d+)").matcher(created.body());
      assertTrue(m.find(), created.body());
      String cr = m.group(1);
      var early = server.httpAs(aliceToken, "POST", "/nacos/nacelle/v1/change/publish", Map.of("id", cr), Map.of());
      assertEquals(409, early.status(), "not before its approval: " + early.body());
      var self = server.httpAs(aliceToken, "POST", "/nacos/nacelle/v1/change/approve", Map.of("id", cr), Map.of());
      assertEquals(403, self.status(), "never by its author: " + self.body());
      assertTrue(change(bobToken, "approve", cr).contains("\"state\":\"approved\""));
      assertTrue(change(aliceToken, "publish", cr).contains("\"state\":\"published\""));

      Await.until(WAIT, "the listener gets the reviewed change (got " + rec.contents() + ")", () -> rec.received("limit: 2"));
      assertEquals("limit: 2", alice.getConfig(id, REVIEWED, 5000));
      assertEquals("limit: 2", server.get(id, REVIEWED));
    } finally {
      Clients.shutdown(alice);
    }
  }
}
