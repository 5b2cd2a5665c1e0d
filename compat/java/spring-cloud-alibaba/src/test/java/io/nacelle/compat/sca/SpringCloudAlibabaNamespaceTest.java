package io.nacelle.compat.sca;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * The same app in a namespace of its own ({@code spring.cloud.nacos.config.namespace}), as a
 * user whose only permission is to read that namespace ({@code dev:*:*}); the same keys in
 * the public namespace hold other values. (A JVM of its own: see {@link ScaFixture}.)
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class SpringCloudAlibabaNamespaceTest {

  private static final String NAMESPACE = "dev";
  private static final String GROUP = "DEFAULT_GROUP";
  private static final String SHARED_GROUP = "SHARED_GROUP";
  private static final String USER = "sca-dev";
  private static final String PASSWORD = "sca-dev-Pw-1";

  private ScaFixture sca;

  @BeforeAll
  void start() {
    sca = ScaFixture.start("sca-namespace");
    sca.nacelle.createNamespace(NAMESPACE, "development");
    sca.createUser(USER, PASSWORD, NAMESPACE + ":*:*", "r");
    sca.publish("", "app.yaml", GROUP, "demo:\n  greeting: hello-public\n");
    sca.publish("", "shared.yaml", SHARED_GROUP, "demo:\n  shared: shared-public\n");
    sca.publish(NAMESPACE, "app.yaml", GROUP, "demo:\n  greeting: hello-dev\n");
    sca.publish(NAMESPACE, "shared.yaml", SHARED_GROUP, "demo:\n  shared: shared-dev\n");
    sca.startApp(USER, PASSWORD, "--spring.cloud.nacos.config.namespace=" + NAMESPACE);
  }

  @AfterAll
  void stop() {
    if (sca != null) {
      sca.close();
    }
  }

  @Test
  @Order(1)
  void servesTheNamespacesValues() {
    Map<String, Map<String, String>> v = sca.values();
    for (String bean : new String[] {"refreshScope", "properties", "environment"}) {
      assertEquals("hello-dev", v.get(bean).get("greeting"), bean);
      assertEquals("shared-dev", v.get(bean).get("shared"), bean);
    }
  }

  @Test
  @Order(2)
  void followsPublishesInItsNamespace() {
    sca.publishAndAwait(NAMESPACE, "app.yaml", GROUP, "demo:\n  greeting: hello-dev-2\n", "greeting", "hello-dev-2");
    sca.publishAndAwait(NAMESPACE, "shared.yaml", SHARED_GROUP, "demo:\n  shared: shared-dev-2\n",
        "shared", "shared-dev-2");
  }

  @Test
  @Order(3)
  void aPublishOfTheSameKeyInThePublicNamespaceIsNotItsConfig() {
    String publicContent = "demo:\n  greeting: hello-public-2\n";
    sca.publish("", "app.yaml", GROUP, publicContent);
    // A later publish in its namespace, once served, shows the public one changed nothing.
    Map<String, Map<String, String>> v = sca.publishAndAwait(NAMESPACE, "late.yaml", GROUP,
        "demo:\n  late: dev-late\n", "late", "dev-late");
    assertEquals("hello-dev-2", v.get("refreshScope").get("greeting"));
    assertEquals("hello-dev-2", v.get("properties").get("greeting"));
    Map<String, Object> endpoint = sca.getJson("/actuator/nacosconfig");
    @SuppressWarnings("unchecked")
    List<Map<String, Object>> history = (List<Map<String, Object>>) endpoint.get("RefreshHistory");
    assertFalse(history.stream().anyMatch(r -> ScaFixture.md5(publicContent).equals(r.get("md5"))),
        "no refresh with the public namespace's app.yaml: " + history);
  }
}
