package io.nacelle.compat.harness;

import java.util.List;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.TestWatcher;

/**
 * JUnit 5 extension ({@code @ExtendWith(NacelleLogOnFailure.class)}): when a test fails, prints
 * the log tail of every nacelle started during that test and of every one still running.
 * JUnit is a provided dependency of the harness: add junit-jupiter to your own module.
 */
public final class NacelleLogOnFailure implements BeforeEachCallback, TestWatcher {
  private static final ExtensionContext.Namespace NS = ExtensionContext.Namespace.create(NacelleLogOnFailure.class);

  @Override
  public void beforeEach(ExtensionContext context) {
    context.getStore(NS).put("first", NacelleServer.CREATED.size());
  }

  @Override
  public void testFailed(ExtensionContext context, Throwable cause) {
    Integer first = context.getStore(NS).get("first", Integer.class);
    List<NacelleServer> all = NacelleServer.created();
    System.err.println("[harness] " + context.getDisplayName() + " failed: " + cause);
    for (int i = 0; i < all.size(); i++) {
      NacelleServer s = all.get(i);
      if ((first != null && i >= first) || s.isRunning()) {
        s.printLogTail(40);
      }
    }
  }
}
