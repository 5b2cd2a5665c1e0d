package io.nacelle.compat.maintainer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.alibaba.nacos.api.config.model.ConfigBasicInfo;
import com.alibaba.nacos.api.config.model.ConfigCloneInfo;
import com.alibaba.nacos.api.config.model.ConfigDetailInfo;
import com.alibaba.nacos.api.config.model.ConfigGrayInfo;
import com.alibaba.nacos.api.config.model.SameConfigPolicy;
import com.alibaba.nacos.api.model.Page;
import com.fasterxml.jackson.databind.JsonNode;
import com.alibaba.nacos.common.utils.JacksonUtils;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * {@code ConfigMaintainerService}'s config calls: /nacos/v3/admin/cs/config (GET, POST, DELETE),
 * /batch, /list (accurate and blur), /metadata (PUT), /beta (POST with the betaIps header, GET,
 * DELETE), /clone. The SDK has no import or export call.
 */
class ConfigTest extends MaintainerTestBase {
  static final String GROUP = "OPS_GROUP";

  static List<String> dataIds(Page<ConfigBasicInfo> page) {
    return page.getPageItems().stream().map(ConfigBasicInfo::getDataId).sorted().toList();
  }

  @Test
  void publishGetUpdateMetadataDelete() throws Exception {
    String content = "server:\n  port: 8080\n";
    long before = System.currentTimeMillis();
    assertTrue(
        maintainer.publishConfig(
            "app.yaml", GROUP, "public", content, "billing", null, "blue,green", "the app's config", "yaml"));

    ConfigDetailInfo c = maintainer.getConfig("app.yaml", GROUP, "public");
    assertEquals("app.yaml", c.getDataId());
    assertEquals(GROUP, c.getGroupName());
    assertEquals("public", c.getNamespaceId());
    assertEquals(content, c.getContent());
    assertEquals(md5(content), c.getMd5());
    assertEquals("yaml", c.getType());
    assertEquals("billing", c.getAppName());
    assertEquals("the app's config", c.getDesc());
    assertEquals("blue,green", c.getConfigTags());
    assertEquals(io.nacelle.compat.harness.NacelleServer.ADMIN_USERNAME, c.getCreateUser(), "the logged-in user");
    assertEquals("127.0.0.1", c.getCreateIp());
    assertTrue(c.getId() != null && c.getId() > 0, "id " + c.getId());
    assertTrue(c.getCreateTime() >= before - 1000, "createTime " + c.getCreateTime());
    assertTrue(c.getModifyTime() >= c.getCreateTime(), "modifyTime " + c.getModifyTime());

    // The short form: default group and namespace, type text.
    assertTrue(maintainer.publishConfig("plain.txt", "hello"));
    ConfigDetailInfo plain = maintainer.getConfig("plain.txt");
    assertEquals("DEFAULT_GROUP", plain.getGroupName());
    assertEquals("hello", plain.getContent());
    assertEquals("text", plain.getType());

    // An update keeps the id.
    assertTrue(maintainer.publishConfig("app.yaml", GROUP, "public", "server:\n  port: 9090\n"));
    ConfigDetailInfo updated = maintainer.getConfig("app.yaml", GROUP, "public");
    assertEquals("server:\n  port: 9090\n", updated.getContent());
    assertEquals(c.getId(), updated.getId());

    assertTrue(maintainer.updateConfigMetadata("app.yaml", GROUP, "public", "described again", "red"));
    ConfigDetailInfo meta = maintainer.getConfig("app.yaml", GROUP, "public");
    assertEquals("described again", meta.getDesc());
    assertEquals("red", meta.getConfigTags());
    assertEquals("server:\n  port: 9090\n", meta.getContent(), "metadata leaves the content alone");

    assertTrue(maintainer.deleteConfig("app.yaml", GROUP, "public"));
    refused(404, "Config not exist", () -> maintainer.getConfig("app.yaml", GROUP, "public"));
    // Deleting an absent config is true, as in Nacos.
    assertTrue(maintainer.deleteConfig("app.yaml", GROUP, "public"));
    assertTrue(maintainer.deleteConfig("plain.txt"));

    refused(400, "groupName", () -> maintainer.getConfig("app.yaml", "", "public"));
  }

  @Test
  void listSearchAndBatchDelete() throws Exception {
    assertTrue(maintainer.createNamespace("search-ns", "Search", ""));
    String ns = "search-ns";
    assertTrue(maintainer.publishConfig("svc-a.yaml", GROUP, ns, "name: a\nlevel: gold\n", null, null, "t1", null, "yaml"));
    assertTrue(maintainer.publishConfig("svc-b.json", GROUP, ns, "{\"name\":\"b\"}", null, null, null, null, "json"));
    assertTrue(maintainer.publishConfig("other.properties", "OTHER_GROUP", ns, "level=gold", "billing", null, null, null, "properties"));

    Page<ConfigBasicInfo> all = maintainer.listConfigs(ns);
    assertEquals(3, all.getTotalCount());
    assertEquals(List.of("other.properties", "svc-a.yaml", "svc-b.json"), dataIds(all));
    ConfigBasicInfo a =
        all.getPageItems().stream().filter(i -> i.getDataId().equals("svc-a.yaml")).findFirst().orElseThrow();
    assertEquals(GROUP, a.getGroupName());
    assertEquals(ns, a.getNamespaceId());
    assertEquals("yaml", a.getType());
    assertEquals(md5("name: a\nlevel: gold\n"), a.getMd5());

    // accurate: exact names.
    Page<ConfigBasicInfo> exact = maintainer.listConfigs("svc-a.yaml", GROUP, ns);
    assertEquals(List.of("svc-a.yaml"), dataIds(exact));
    assertEquals(0, maintainer.listConfigs("svc", GROUP, ns).getTotalCount());
    assertEquals(List.of("svc-b.json"), dataIds(maintainer.listConfigs("", "", ns, "json")));
    assertEquals(List.of("other.properties"), dataIds(maintainer.listConfigs("", "", ns, null, null, "billing")));

    // blur: the SDK wraps names in `*`.
    assertEquals(List.of("svc-a.yaml", "svc-b.json"), dataIds(maintainer.searchConfigs("svc", "", ns)));
    assertEquals(List.of("svc-a.yaml", "svc-b.json"), dataIds(maintainer.searchConfigs("", "OPS", ns)));
    assertEquals(
        List.of("other.properties", "svc-a.yaml"), dataIds(maintainer.searchConfigs("", "", ns, "gold", null)));
    assertEquals(List.of("svc-a.yaml"), dataIds(maintainer.searchConfigs("svc", "", ns, "gold", "yaml")));

    // Paging.
    Page<ConfigBasicInfo> page2 =
        maintainer.searchConfigByDetails("", "", ns, "blur", null, null, null, null, 2, 2);
    assertEquals(3, page2.getTotalCount());
    assertEquals(2, page2.getPageNumber());
    assertEquals(2, page2.getPagesAvailable());
    assertEquals(1, page2.getPageItems().size());

    // The configs of a namespace (the history controller's /configs).
    List<ConfigBasicInfo> inNs = maintainer.getConfigListByNamespace(ns);
    assertEquals(
        List.of("other.properties", "svc-a.yaml", "svc-b.json"),
        inNs.stream().map(ConfigBasicInfo::getDataId).sorted().toList());

    // Batch delete by id; an unknown id is skipped.
    List<Long> ids = all.getPageItems().stream().map(ConfigBasicInfo::getId).sorted(Comparator.naturalOrder()).toList();
    assertTrue(maintainer.deleteConfigs(List.of(ids.get(0), ids.get(1), 999_999L)));
    Page<ConfigBasicInfo> left = maintainer.listConfigs(ns);
    assertEquals(1, left.getTotalCount());
    assertEquals(ids.get(2), left.getPageItems().get(0).getId());
    assertTrue(maintainer.deleteConfigs(List.of(ids.get(2))));
    assertEquals(0, maintainer.listConfigs(ns).getTotalCount());
    assertTrue(maintainer.deleteNamespace(ns));
  }

  @Test
  void betaPublishQueryStop() throws Exception {
    assertTrue(maintainer.publishConfig("beta.properties", GROUP, "public", "level=formal"));
    refused(404, "not in beta", () -> maintainer.queryBeta("beta.properties", GROUP, "public"));

    assertTrue(
        maintainer.publishBetaConfig(
            "beta.properties", GROUP, "public", "level=beta", null, null, null, null, "properties",
            "127.0.0.2,127.0.0.3"));
    ConfigGrayInfo beta = maintainer.queryBeta("beta.properties", GROUP, "public");
    assertEquals("beta.properties", beta.getDataId());
    assertEquals(GROUP, beta.getGroupName());
    assertEquals("level=beta", beta.getContent());
    assertEquals(md5("level=beta"), beta.getMd5());
    assertEquals("beta", beta.getGrayName());
    JsonNode rule = JacksonUtils.toObj(beta.getGrayRule());
    assertEquals("beta", rule.get("type").asText());
    assertEquals("127.0.0.2,127.0.0.3", rule.get("expr").asText());
    assertEquals("1.0.0", rule.get("version").asText());
    assertEquals(Integer.MAX_VALUE, rule.get("priority").asInt());
    // The formal config is unchanged.
    assertEquals("level=formal", maintainer.getConfig("beta.properties", GROUP, "public").getContent());

    assertTrue(maintainer.stopBeta("beta.properties", GROUP, "public"));
    refused(404, "not in beta", () -> maintainer.queryBeta("beta.properties", GROUP, "public"));
    assertEquals("level=formal", maintainer.getConfig("beta.properties", GROUP, "public").getContent());
    assertTrue(maintainer.deleteConfig("beta.properties", GROUP, "public"));
  }

  static ConfigCloneInfo cloneOf(long id, String group, String dataId) {
    ConfigCloneInfo i = new ConfigCloneInfo();
    i.setConfigId(id);
    i.setTargetGroupName(group);
    i.setTargetDataId(dataId);
    return i;
  }

  @Test
  void cloneIntoAnotherNamespace() throws Exception {
    assertTrue(maintainer.createNamespace("clone-target", "Clone target", ""));
    assertTrue(maintainer.publishConfig("src.yaml", GROUP, "public", "k: v", "billing", null, null, "to clone", "yaml"));
    long id = maintainer.getConfig("src.yaml", GROUP, "public").getId();

    Map<String, Object> r =
        maintainer.cloneConfig(
            "clone-target", List.of(cloneOf(id, "CLONED", "copy.yaml")), null, SameConfigPolicy.ABORT);
    assertEquals(1, ((Number) r.get("succCount")).intValue(), r.toString());
    assertEquals(0, ((Number) r.get("skipCount")).intValue(), r.toString());
    ConfigDetailInfo copy = maintainer.getConfig("copy.yaml", "CLONED", "clone-target");
    assertEquals("k: v", copy.getContent());
    assertEquals("yaml", copy.getType());
    assertEquals("clone-target", copy.getNamespaceId());

    // The same target again: SKIP leaves it, OVERWRITE replaces it.
    assertTrue(maintainer.publishConfig("src.yaml", GROUP, "public", "k: v2", null, null, null, null, "yaml"));
    r = maintainer.cloneConfig("clone-target", List.of(cloneOf(id, "CLONED", "copy.yaml")), null, SameConfigPolicy.SKIP);
    assertEquals(0, ((Number) r.get("succCount")).intValue(), r.toString());
    assertEquals(1, ((Number) r.get("skipCount")).intValue(), r.toString());
    assertEquals("k: v", maintainer.getConfig("copy.yaml", "CLONED", "clone-target").getContent());
    r = maintainer.cloneConfig(
        "clone-target", List.of(cloneOf(id, "CLONED", "copy.yaml")), null, SameConfigPolicy.OVERWRITE);
    assertEquals(1, ((Number) r.get("succCount")).intValue(), r.toString());
    assertEquals("k: v2", maintainer.getConfig("copy.yaml", "CLONED", "clone-target").getContent());
    assertNull(r.get("failData"), r.toString());

    assertTrue(maintainer.deleteConfig("copy.yaml", "CLONED", "clone-target"));
    assertTrue(maintainer.deleteConfig("src.yaml", GROUP, "public"));
    assertTrue(maintainer.deleteNamespace("clone-target"));
  }
}
