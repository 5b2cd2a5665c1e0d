package io.nacelle.compat.scenarios;

import static io.nacelle.compat.scenarios.Clients.GROUP;
import static io.nacelle.compat.scenarios.Clients.WAIT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.alibaba.nacos.api.config.ConfigService;
import io.nacelle.compat.harness.Await;
import io.nacelle.compat.harness.NacelleLogOnFailure;
import io.nacelle.compat.harness.NacelleServer;
import io.nacelle.compat.harness.Ports;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * gRPC over TLS ({@code nacos.remote.client.rpc.tls.enable}): nacelle serves TLS on a separate
 * gRPC port T+1000 ({@code --grpc-tls-port}), and the client is given serverAddr 127.0.0.1:T so
 * that it derives that port. Auth is off: the config client then makes no HTTP call.
 */
@ExtendWith(NacelleLogOnFailure.class)
class GrpcTlsTest {
  @Test
  void configOverTls() throws Exception {
    Path dir = Files.createTempDirectory("nacelle-tls-");
    Path crt = dir.resolve("server.crt");
    Path key = dir.resolve("server.key");
    Process p =
        new ProcessBuilder(
                List.of(
                    "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", key.toString(), "-out", crt.toString(), "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"))
            .redirectErrorStream(true)
            .start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(30, TimeUnit.SECONDS) && p.exitValue() == 0, "openssl: " + out);

    int t = Ports.pickHttpPort(); // T+1000 free: the TLS gRPC port the client derives
    try (NacelleServer server =
        NacelleServer.builder()
            .name("tls")
            .auth(false)
            .args("--tls-cert", crt.toString(), "--tls-key", key.toString(), "--tls-port", Integer.toString(Ports.pickSinglePort()),
                "--grpc-tls-port", Integer.toString(t + 1000))
            .start()) {
      Properties props = Clients.props("127.0.0.1:" + t);
      props.setProperty("nacos.remote.client.rpc.tls.enable", "true");
      props.setProperty("nacos.remote.client.rpc.tls.trustAll", "true");
      ConfigService client = Clients.config(props);
      try {
        String id = Clients.uniq("tls") + ".yaml";
        assertTrue(client.publishConfig(id, GROUP, "tls: on"));
        assertEquals("tls: on", server.get(id, GROUP), "written through the TLS port");
        Clients.Recorder rec = new Clients.Recorder();
        assertEquals("tls: on", client.getConfigAndSignListener(id, GROUP, 5000, rec));
        long t0 = System.nanoTime();
        server.publish(id, GROUP, "tls: changed");
        Await.until(WAIT, "push over TLS (got " + rec.contents() + ")", () -> rec.received("tls: changed"));
        Clients.reportDelay("gRPC over TLS", t0, rec.firstNanos("tls: changed"));
      } finally {
        Clients.shutdown(client);
      }
    }
  }
}
