package io.nacelle.compat.harness;

import java.time.Duration;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

/** Polling with a deadline: tests wait for a condition, never for a fixed time. */
public final class Await {
  private Await() {}

  /** Polls every 20 ms until {@code condition} holds; AssertionError with {@code what} at the deadline. */
  public static void until(Duration timeout, String what, BooleanSupplier condition) {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (true) {
      if (condition.getAsBoolean()) {
        return;
      }
      if (System.nanoTime() > deadline) {
        throw new AssertionError("timed out after " + timeout + " waiting for: " + what);
      }
      NacelleServer.sleep(20);
    }
  }

  /** Polls until {@code supplier} returns non-null, and returns it. */
  public static <T> T value(Duration timeout, String what, Supplier<T> supplier) {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (true) {
      T v = supplier.get();
      if (v != null) {
        return v;
      }
      if (System.nanoTime() > deadline) {
        throw new AssertionError("timed out after " + timeout + " waiting for: " + what);
      }
      NacelleServer.sleep(20);
    }
  }
}
