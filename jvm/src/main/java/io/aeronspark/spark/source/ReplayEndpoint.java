package io.aeronspark.spark.source;

import java.io.IOException;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import io.aeron.ChannelUri;
import io.aeronspark.spark.ArchiveSettings;
import io.aeronspark.spark.options.OptionError;

/**
 * Where the archive sends a UDP replay (and control responses) to this executor: an address of this
 * host that routes to the archive, never {@code localhost}, so executors on other hosts than the
 * archive work without response channels. As the Python source: {@code aeron.host} when given, else
 * the local address that routes to the control channel's endpoint; the subscription binds
 * {@code aeron.bindAddress} (default: that address) on port 0, and the archive is told the
 * advertised host with the port the driver bound. Resolved on each executor: every host its own.
 * Control responses (without archive.responseChannel) bind the advertised host.
 */
final class ReplayEndpoint {
    static final String AERON_HOST = "aeron.host";
    static final String AERON_BIND_ADDRESS = "aeron.bindAddress";
    /** Told when the control channel has no endpoint to route towards. */
    static final String LOOPBACK_HOST = "127.0.0.1";

    private static final Map<String, ReplayEndpoint> RESOLVED = new ConcurrentHashMap<>();

    final String advertisedHost;
    final String bindHost;

    private ReplayEndpoint(final String advertisedHost, final String bindHost) {
        this.advertisedHost = advertisedHost;
        this.bindHost = bindHost;
    }

    /** This host's endpoint for the options' archive (resolved once per JVM per archive and options). */
    static ReplayEndpoint of(final SourceOptions options) {
        final String key = options.archive.controlChannel + "|" + options.aeronHost + "|" + options.aeronBindAddress;
        return RESOLVED.computeIfAbsent(key, k -> resolve(options.archive, options.aeronHost, options.aeronBindAddress));
    }

    static ReplayEndpoint resolve(final ArchiveSettings archive, final String host, final String bindAddress) {
        final String advertised = host != null ? host : addressToward(archive);
        return new ReplayEndpoint(advertised, bindAddress != null ? bindAddress : advertised);
    }

    /** The channel to subscribe on: a free UDP port of the bind address. */
    String subscribeChannel() {
        return "aeron:udp?endpoint=" + hostPort(bindHost, 0);
    }

    /**
     * Control responses when archive.responseChannel is not given: a free port of the advertised host
     * (the Java client tells the archive the channel it bound, so it cannot bind one address and name
     * another; behind NAT use a response channel, control-mode=response).
     */
    String controlResponseChannel() {
        return "aeron:udp?endpoint=" + hostPort(advertisedHost, 0);
    }

    /** The channel the archive is told, from the subscription's resolved channel (its bound port). */
    String told(final String resolvedChannel) {
        final String endpoint = ChannelUri.parse(resolvedChannel).get("endpoint");
        final String port = endpoint.substring(endpoint.lastIndexOf(':') + 1);
        return "aeron:udp?endpoint=" + hostPort(advertisedHost, Integer.parseInt(port));
    }

    private static String hostPort(final String host, final int port) {
        return (host.contains(":") ? "[" + host + "]" : host) + ":" + port;
    }

    /** The local address the OS routes the control endpoint's traffic from (a UDP connect sends nothing). */
    private static String addressToward(final ArchiveSettings archive) {
        if (archive.controlChannel.startsWith("aeron:ipc")) {
            return LOOPBACK_HOST;
        }
        final String endpoint = ChannelUri.parse(archive.controlChannel).get("endpoint");
        if (endpoint == null) {
            return LOOPBACK_HOST;
        }
        final int colon = endpoint.lastIndexOf(':');
        final String host = endpoint.substring(0, colon).replace("[", "").replace("]", "");
        final int port = Integer.parseInt(endpoint.substring(colon + 1));
        try (DatagramSocket socket = new DatagramSocket()) {
            socket.connect(InetAddress.getByName(host), port);
            final InetAddress local = socket.getLocalAddress();
            return local == null || local.isAnyLocalAddress() ? LOOPBACK_HOST : local.getHostAddress();
        } catch (IOException | RuntimeException error) {
            throw new OptionError("no address of this host routes to the archive at " + archive.describeEndpoint()
                + " (" + error + "); set option " + AERON_HOST + " to an address of this host the archive reaches");
        }
    }
}
