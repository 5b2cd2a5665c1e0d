package io.nacelle.compat.maintainer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.alibaba.nacos.api.PropertyKeyConst;
import com.alibaba.nacos.api.exception.NacosException;
import com.alibaba.nacos.maintainer.client.NacosMaintainerFactory;
import com.alibaba.nacos.maintainer.client.config.ConfigMaintainerService;
import io.nacelle.compat.harness.NacelleLogOnFailure;
import io.nacelle.compat.harness.NacelleServer;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.Properties;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.function.Executable;

/**
 * One nacelle (authentication on) and one {@code ConfigMaintainerService} logged in as its admin
 * per test class. The SDK's {@code shutdown()} closes a process-wide HTTP client
 * ({@code HttpClientManager} is a singleton), so a service is shut down only when its class is
 * done, never while another one of the same class is in use.
 */
@ExtendWith(NacelleLogOnFailure.class)
abstract class MaintainerTestBase {
  static final Duration WAIT = Duration.ofSeconds(30);
  static NacelleServer server;
  static ConfigMaintainerService maintainer;

  @BeforeAll
  static void startServer() throws Exception {
    server = NacelleServer.builder().name("maintainer").auth(true).start();
    maintainer = connect(server.username(), server.password());
  }

  @AfterAll
  static void stopServer() throws Exception {
    if (maintainer != null) {
      maintainer.shutdown();
      maintainer = null;
    }
    if (server != null) {
      server.close();
      server = null;
    }
  }

  /** A maintainer service that logs in with {@code username}/{@code password}. */
  static ConfigMaintainerService connect(String username, String password) throws NacosException {
    Properties p = new Properties();
    p.setProperty(PropertyKeyConst.SERVER_ADDR, server.serverAddr());
    p.setProperty(PropertyKeyConst.USERNAME, username);
    p.setProperty(PropertyKeyConst.PASSWORD, password);
    return NacosMaintainerFactory.createConfigMaintainerService(p);
  }

  /** The SDK's failure: a NacosException whose code is the HTTP status and whose message names the cause. */
  static NacosException refused(int status, String messagePart, Executable call) {
    NacosException e = assertThrows(NacosException.class, call);
    assertEquals(status, e.getErrCode(), e.toString());
    if (!e.getErrMsg().contains(messagePart)) {
      throw new AssertionError("expected \"" + messagePart + "\" in: " + e.getErrMsg());
    }
    return e;
  }

  static String md5(String s) {
    try {
      byte[] d = MessageDigest.getInstance("MD5").digest(s.getBytes(StandardCharsets.UTF_8));
      return String.format("%032x", new BigInteger(1, d));
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }
}
