package io.nacelle.compat.maintainer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.alibaba.nacos.api.model.response.Namespace;
import io.nacelle.compat.harness.Await;
import java.util.List;
import org.junit.jupiter.api.Test;

/** {@code CoreMaintainerService}'s namespace calls: /nacos/v3/admin/core/namespace[/list|/check]. */
class NamespaceTest extends MaintainerTestBase {

  static Namespace find(List<Namespace> list, String id) {
    return list.stream().filter(n -> id.equals(n.getNamespace())).findFirst().orElse(null);
  }

  @Test
  void createGetListCheckUpdateDelete() throws Exception {
    assertTrue(maintainer.createNamespace("ops-team", "Ops", "the ops team"));

    Namespace ns = maintainer.getNamespace("ops-team");
    assertEquals("ops-team", ns.getNamespace());
    assertEquals("Ops", ns.getNamespaceShowName());
    assertEquals("the ops team", ns.getNamespaceDesc());
    assertEquals(200, ns.getQuota());
    assertEquals(0, ns.getConfigCount());
    assertEquals(1, ns.getType(), "NamespaceTypeEnum.CUSTOM in Nacos 3");

    // A config in it is counted.
    assertTrue(maintainer.publishConfig("counted.properties", "DEFAULT_GROUP", "ops-team", "a=1"));
    Await.until(WAIT, "configCount 1", () -> {
      try {
        return maintainer.getNamespace("ops-team").getConfigCount() == 1;
      } catch (Exception e) {
        throw new IllegalStateException(e);
      }
    });

    List<Namespace> list = maintainer.getNamespaceList();
    assertEquals("public", list.get(0).getNamespace(), "the default namespace first");
    assertEquals("public", list.get(0).getNamespaceShowName());
    assertEquals(0, list.get(0).getType(), "NamespaceTypeEnum.GLOBAL");
    Namespace listed = find(list, "ops-team");
    assertEquals("Ops", listed.getNamespaceShowName());
    assertEquals("the ops team", listed.getNamespaceDesc());
    assertEquals(1, listed.getConfigCount());
    assertEquals(2, list.size(), list.toString());

    assertTrue(maintainer.checkNamespaceIdExist("ops-team"));
    assertFalse(maintainer.checkNamespaceIdExist("no-such-team"));

    assertTrue(maintainer.updateNamespace("ops-team", "Operations", "renamed"));
    ns = maintainer.getNamespace("ops-team");
    assertEquals("Operations", ns.getNamespaceShowName());
    assertEquals("renamed", ns.getNamespaceDesc());

    // The SDK's overload without an id sends namespaceId="" and Nacos's HttpUtils.encodingParams
    // drops empty values, so the form has no namespaceId: Nacos 3's NamespaceForm.validate()
    // answers 400/10000 (only an id sent blank gets a UUID), and so does Nacelle.
    refused(
        400,
        "required parameter 'namespaceId' is missing",
        () -> maintainer.createNamespace("Generated", "made without an id"));
    assertEquals(2, maintainer.getNamespaceList().size());

    // Refusals, as NacosExceptions carrying Nacos 3's status and message.
    refused(400, "namespace already exist", () -> maintainer.createNamespace("ops-team", "again", ""));
    refused(400, "namespace already exist", () -> maintainer.createNamespace("public", "public", ""));
    refused(400, "illegal namespace", () -> maintainer.createNamespace("bad id!", "bad", ""));
    refused(404, "namespace not exist", () -> maintainer.getNamespace("no-such-team"));

    assertTrue(maintainer.deleteConfig("counted.properties", "DEFAULT_GROUP", "ops-team"));
    assertTrue(maintainer.deleteNamespace("ops-team"));
    assertFalse(maintainer.checkNamespaceIdExist("ops-team"));
    refused(404, "namespace not exist", () -> maintainer.getNamespace("ops-team"));
    assertEquals(List.of("public"), maintainer.getNamespaceList().stream().map(Namespace::getNamespace).toList());
  }

  @Test
  void thePublicNamespace() throws Exception {
    Namespace pub = maintainer.getNamespace("public");
    assertEquals("public", pub.getNamespace());
    assertEquals("public", pub.getNamespaceShowName());
    assertEquals(0, pub.getType());
    assertEquals(200, pub.getQuota());
  }
}
