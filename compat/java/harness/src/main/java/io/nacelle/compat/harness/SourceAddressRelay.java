package io.nacelle.compat.harness;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.BindException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A plain TCP relay that makes a real client appear to a nacelle server from another loopback
 * address. The Java clients cannot choose their source address, and on Linux a connection to any
 * 127.x address comes from 127.0.0.1; nacelle takes the client IP from the socket. The relay
 * listens on 127.0.0.1:P (→ the server's HTTP port) and 127.0.0.1:P+1000 (→ its gRPC port) and
 * opens each upstream connection from {@code sourceIp} (e.g. 127.0.0.2), so the server sees that
 * address. Bytes are copied unchanged; a client given {@link #serverAddr()} derives the gRPC port
 * as HTTP + 1000 as usual.
 */
public final class SourceAddressRelay implements AutoCloseable {
  private final InetAddress source;
  private final List<ServerSocket> listeners;
  private final Set<Socket> sockets = ConcurrentHashMap.newKeySet();
  private final int port;
  private volatile boolean closed;

  private SourceAddressRelay(InetAddress source, int port, List<ServerSocket> listeners) {
    this.source = source;
    this.port = port;
    this.listeners = listeners;
  }

  /** Relays {@code server}'s HTTP and gRPC ports, connecting upstream from {@code sourceIp}. */
  public static SourceAddressRelay start(NacelleServer server, String sourceIp) {
    for (int attempt = 0; attempt < 50; attempt++) {
      int p = Ports.pickSinglePort();
      if (!Ports.isFree(p + 1000)) {
        continue;
      }
      ServerSocket http = null;
      ServerSocket grpc = null;
      try {
        InetAddress lo = InetAddress.getByName("127.0.0.1");
        http = new ServerSocket(p, 128, lo);
        grpc = new ServerSocket(p + 1000, 128, lo);
        SourceAddressRelay r = new SourceAddressRelay(InetAddress.getByName(sourceIp), p, List.of(http, grpc));
        r.accept(http, server.httpPort());
        r.accept(grpc, server.grpcPort());
        return r;
      } catch (BindException e) {
        closeQuietly(http);
        closeQuietly(grpc);
      } catch (IOException e) {
        closeQuietly(http);
        closeQuietly(grpc);
        throw new IllegalStateException("cannot start relay", e);
      }
    }
    throw new IllegalStateException("no free relay ports");
  }

  /** {@code 127.0.0.1:P}: give this to the client as its serverAddr. */
  public String serverAddr() {
    return "127.0.0.1:" + port;
  }

  public int httpPort() {
    return port;
  }

  private void accept(ServerSocket listener, int targetPort) {
    Thread t =
        new Thread(
            () -> {
              while (!closed) {
                Socket in;
                try {
                  in = listener.accept();
                } catch (IOException e) {
                  return;
                }
                Socket out = new Socket();
                try {
                  out.bind(new InetSocketAddress(source, 0));
                  out.connect(new InetSocketAddress("127.0.0.1", targetPort), 2000);
                } catch (IOException e) {
                  closeQuietly(in);
                  closeQuietly(out);
                  continue;
                }
                sockets.add(in);
                sockets.add(out);
                pump(in, out);
                pump(out, in);
              }
            },
            "relay-accept-" + listener.getLocalPort());
    t.setDaemon(true);
    t.start();
  }

  private void pump(Socket from, Socket to) {
    Thread t =
        new Thread(
            () -> {
              byte[] buf = new byte[16384];
              try (InputStream in = from.getInputStream()) {
                OutputStream out = to.getOutputStream();
                int n;
                while ((n = in.read(buf)) >= 0) {
                  out.write(buf, 0, n);
                  out.flush();
                }
                to.shutdownOutput();
              } catch (IOException e) {
                closeQuietly(from);
                closeQuietly(to);
              }
            },
            "relay-pump");
    t.setDaemon(true);
    t.start();
  }

  @Override
  public void close() {
    closed = true;
    listeners.forEach(SourceAddressRelay::closeQuietly);
    sockets.forEach(SourceAddressRelay::closeQuietly);
  }

  private static void closeQuietly(java.io.Closeable c) {
    if (c != null) {
      try {
        c.close();
      } catch (IOException ignored) {
        // closing anyway
      }
    }
  }
}
