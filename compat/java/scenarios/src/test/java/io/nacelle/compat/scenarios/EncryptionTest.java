package io.nacelle.compat.scenarios;

import static io.nacelle.compat.scenarios.Clients.GROUP;
import static io.nacelle.compat.scenarios.Clients.WAIT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.alibaba.nacos.api.config.ConfigService;
import io.nacelle.compat.harness.Await;
import io.nacelle.compat.harness.NacelleLogOnFailure;
import io.nacelle.compat.harness.NacelleServer;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** {@code cipher-aes-} configs through the client's encryption filter and the "aes" plugin. */
@ExtendWith(NacelleLogOnFailure.class)
class EncryptionTest {
  static NacelleServer server;
  static ConfigService client;

  @BeforeAll
  static void start() throws Exception {
    server = NacelleServer.builder().name("cipher").auth(false).start();
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
  void serverEncryptedConfigIsDecryptedByTheClient() throws Exception {
    String id = "cipher-aes-" + Clients.uniq("db") + ".yml";
    String plain = "password: s3cr3t\nname: 数据库 🔐";
    server.publish(id, GROUP, plain); // HTTP publish: the server encrypts
    var http = server.getResult("", id, GROUP, Map.of());
    assertEquals(plain, http.body(), "HTTP v1 GET answers the plaintext");
    String dataKey = http.header("Encrypted-Data-Key");
    assertNotNull(dataKey, "Encrypted-Data-Key header present");
    assertEquals(plain, client.getConfig(id, GROUP, 5000), "the client's aes plugin decrypts the server's ciphertext");
    assertTrue(
        AesTestEncryptionPlugin.DECRYPTIONS.stream()
            .anyMatch(d -> d.plaintext().equals(plain) && d.secretKey().equals(dataKey) && d.ciphertext().matches("[0-9a-f]+")),
        "gRPC carried lower-case hex ciphertext and the data key, decrypted by the plugin");

    Clients.Recorder rec = new Clients.Recorder();
    client.getConfigAndSignListener(id, GROUP, 5000, rec);
    String plain2 = "password: rotated\nname: 数据库 🔐";
    long t0 = System.nanoTime();
    server.publish(id, GROUP, plain2);
    Await.until(WAIT, "listener gets the decrypted change (got " + rec.contents() + ")", () -> rec.received(plain2));
    Clients.reportDelay("cipher-aes listener", t0, rec.firstNanos(plain2));
  }

  @Test
  void clientEncryptedConfigIsReadableOverHttp() throws Exception {
    String id = "cipher-aes-" + Clients.uniq("client") + ".properties";
    String plain = "token=abc123\n名字=值";
    assertTrue(client.publishConfig(id, GROUP, plain)); // the client encrypts and sends encryptedDataKey
    var r = server.getResult("", id, GROUP, Map.of());
    assertEquals(200, r.status(), r.body());
    assertEquals(plain, r.body(), "HTTP v1 GET decrypts with the data key the client sent");
    assertNotNull(r.header("Encrypted-Data-Key"), "Encrypted-Data-Key header present");
    assertEquals(plain, client.getConfig(id, GROUP, 5000));
    assertTrue(
        AesTestEncryptionPlugin.DECRYPTIONS.stream()
            .anyMatch(d -> d.plaintext().equals(plain) && d.secretKey().equals(r.header("Encrypted-Data-Key"))),
        "read back as ciphertext with the client's own data key");
  }
}
