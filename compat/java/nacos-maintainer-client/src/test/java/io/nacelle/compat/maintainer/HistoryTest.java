package io.nacelle.compat.maintainer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.alibaba.nacos.api.config.model.ConfigBasicInfo;
import com.alibaba.nacos.api.config.model.ConfigHistoryBasicInfo;
import com.alibaba.nacos.api.config.model.ConfigHistoryDetailInfo;
import com.alibaba.nacos.api.model.Page;
import io.nacelle.compat.harness.NacelleServer;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * {@code ConfigHistoryMaintainerService} and the namespace listing of the history controller:
 * /nacos/v3/admin/cs/history (detail), /list, /previous, /configs.
 */
class HistoryTest extends MaintainerTestBase {
  static final String GROUP = "HIST_GROUP";

  @Test
  void listDetailPreviousAndConfigsOfANamespace() throws Exception {
    assertTrue(maintainer.createNamespace("hist-ns", "History", ""));
    String ns = "hist-ns";
    assertTrue(maintainer.publishConfig("hist.properties", GROUP, ns, "v=1", null, null, null, null, "properties"));
    assertTrue(maintainer.publishConfig("hist.properties", GROUP, ns, "v=2", null, null, null, null, "properties"));
    // The SDK's srcUser names someone else: history records the logged-in user (issue 33,
    // item 6: the field is honoured only from a trusted caller).
    assertTrue(
        maintainer.publishConfig("hist.properties", GROUP, ns, "v=3", null, "mallory", null, null, "properties"));
    long configId = maintainer.getConfig("hist.properties", GROUP, ns).getId();

    Page<ConfigHistoryBasicInfo> page = maintainer.listConfigHistory("hist.properties", GROUP, ns, 1, 10);
    assertEquals(3, page.getTotalCount());
    assertEquals(1, page.getPageNumber());
    List<ConfigHistoryBasicInfo> items = page.getPageItems();
    assertEquals(3, items.size());
    // Newest first: two updates, then the insert.
    assertEquals(List.of("U", "U", "I"), items.stream().map(i -> i.getOpType().trim()).toList());
    assertTrue(items.get(0).getId() > items.get(1).getId() && items.get(1).getId() > items.get(2).getId());
    for (ConfigHistoryBasicInfo i : items) {
      assertEquals("hist.properties", i.getDataId());
      assertEquals(GROUP, i.getGroupName());
      assertEquals(ns, i.getNamespaceId());
      assertEquals(NacelleServer.ADMIN_USERNAME, i.getSrcUser(), "the logged-in user");
      assertEquals("127.0.0.1", i.getSrcIp());
      assertEquals("formal", i.getPublishType());
      assertTrue(i.getModifyTime() > 0, "modifyTime");
    }

    // Paging: one per page.
    Page<ConfigHistoryBasicInfo> second = maintainer.listConfigHistory("hist.properties", GROUP, ns, 2, 1);
    assertEquals(3, second.getTotalCount());
    assertEquals(3, second.getPagesAvailable());
    assertEquals(items.get(1).getId(), second.getPageItems().get(0).getId());

    // An update's entry holds the version it replaced.
    ConfigHistoryDetailInfo newest =
        maintainer.getConfigHistoryInfo("hist.properties", GROUP, ns, items.get(0).getId());
    assertEquals(items.get(0).getId(), newest.getId());
    assertEquals("v=2", newest.getContent());
    assertEquals(md5("v=2"), newest.getMd5());
    assertEquals("U", newest.getOpType().trim());
    assertEquals(NacelleServer.ADMIN_USERNAME, newest.getSrcUser());
    ConfigHistoryDetailInfo first =
        maintainer.getConfigHistoryInfo("hist.properties", GROUP, ns, items.get(2).getId());
    assertEquals("v=1", first.getContent());
    assertEquals("I", first.getOpType().trim());

    // An entry asked for under another key is refused.
    refused(
        403,
        "Please check dataId, group or namespaceId.",
        () -> maintainer.getConfigHistoryInfo("other.properties", GROUP, ns, items.get(0).getId()));

    // previous: the newest history entry of the config id.
    ConfigHistoryDetailInfo previous =
        maintainer.getPreviousConfigHistoryInfo("hist.properties", GROUP, ns, configId);
    assertEquals(items.get(0).getId(), previous.getId());
    assertEquals("v=2", previous.getContent());

    // A deletion is a `D` entry holding the deleted content.
    assertTrue(maintainer.deleteConfig("hist.properties", GROUP, ns));
    Page<ConfigHistoryBasicInfo> after = maintainer.listConfigHistory("hist.properties", GROUP, ns, 1, 10);
    assertEquals(4, after.getTotalCount());
    ConfigHistoryBasicInfo deletion = after.getPageItems().get(0);
    assertEquals("D", deletion.getOpType().trim());
    assertEquals(
        "v=3", maintainer.getConfigHistoryInfo("hist.properties", GROUP, ns, deletion.getId()).getContent());
    assertEquals(0, maintainer.getConfigListByNamespace(ns).size());

    // The configs of a namespace.
    assertTrue(maintainer.publishConfig("one.yaml", GROUP, ns, "a: 1", null, null, null, null, "yaml"));
    assertTrue(maintainer.publishConfig("two.json", "G2", ns, "{}", null, null, null, null, "json"));
    List<ConfigBasicInfo> configs = maintainer.getConfigListByNamespace(ns);
    assertEquals(
        List.of("G2/two.json", GROUP + "/one.yaml"),
        configs.stream().map(c -> c.getGroupName() + "/" + c.getDataId()).sorted().toList());
    ConfigBasicInfo one = configs.stream().filter(c -> c.getDataId().equals("one.yaml")).findFirst().orElseThrow();
    assertEquals(ns, one.getNamespaceId());
    assertEquals("yaml", one.getType());
    assertTrue(maintainer.deleteConfig("one.yaml", GROUP, ns));
    assertTrue(maintainer.deleteConfig("two.json", "G2", ns));
    assertTrue(maintainer.deleteNamespace(ns));
  }
}
