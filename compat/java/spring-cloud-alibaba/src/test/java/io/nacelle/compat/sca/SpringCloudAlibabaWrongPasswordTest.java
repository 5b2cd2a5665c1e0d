package io.nacelle.compat.sca;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.fail;

import com.alibaba.nacos.api.exception.NacosException;
import org.junit.jupiter.api.Test;

/**
 * The control for the other tests: the app's credentials are checked, so with a wrong
 * password it cannot load its (non-optional) imports and does not start. (A JVM of its own:
 * see {@link ScaFixture}.)
 */
class SpringCloudAlibabaWrongPasswordTest {

  @Test
  void aWrongPasswordKeepsTheAppFromStarting() {
    try (ScaFixture sca = ScaFixture.start("sca-wrong-password")) {
      sca.createUser("sca-app", "sca-app-Pw-1", ":*:*", "r");
      sca.publish("", "app.yaml", "DEFAULT_GROUP", "demo:\n  greeting: hello\n");
      sca.publish("", "shared.yaml", "SHARED_GROUP", "demo:\n  shared: shared\n");
      Throwable e = assertThrows(Throwable.class, () -> sca.app("sca-app", "not-the-password").close());
      for (Throwable c = e; c != null; c = c.getCause()) {
        System.out.println("[sca] wrong password: " + c);
        if (c instanceof NacosException n && n.getErrCode() == NacosException.NO_RIGHT) {
          return;
        }
      }
      fail("expected a NacosException with code 403 in the causes", e);
    }
  }
}
