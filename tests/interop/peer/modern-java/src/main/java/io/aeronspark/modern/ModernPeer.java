package io.aeronspark.modern;

import java.util.Set;
import java.util.TreeSet;

/**
 * Command-line interop peer built against a current Aeron ({@code aeron-all} 1.51.0 by default):
 * media driver, archive and the real {@code AeronArchive} client. Results are JSON lines on stdout
 * (each with an "event" key), logs on stderr. See docs/interop.md, "Modern Java peer".
 *
 * <p>Exit codes: 0 done, 1 failed (an "error" line on stdout, the stack trace on stderr),
 * 2 bad usage, 3 timed out.
 */
public final class ModernPeer
{
    static final int EXIT_OK = 0;
    static final int EXIT_FAILED = 1;
    static final int EXIT_USAGE = 2;
    static final int EXIT_TIMEOUT = 3;

    private static final String SUBCOMMANDS = "archive driver connect record start-recording stop-recording list " +
        "replay publish truncate purge extend positions segments update-channel replay-merge persistent-subscription replicate scripted-session";
    private static final Set<String> SERVER_FLAGS = Set.of("no-stdin-watch", "spies-simulate-connection");
    private static final Set<String> CONNECTION = Set.of(
        "aeron-dir", "control-channel", "control-stream-id", "response-channel", "response-stream-id",
        "credentials", "hmac-credentials", "message-timeout-ms", "timeout-ms");
    private static final Set<String> CONNECTION_FLAGS = Set.of("embedded-driver");

    private ModernPeer()
    {
    }

    public static void main(final String[] args)
    {
        System.exit(run(args));
    }

    static int run(final String[] args)
    {
        if (args.length == 0)
        {
            return usage("missing subcommand");
        }
        final String command = args[0];
        try
        {
            return switch (command)
            {
                case "archive" -> ServerCommands.archive(Options.parse(command, args, Set.of(
                    "archive-dir", "aeron-dir", "control-channel", "control-stream-id", "local-control-channel",
                    "local-control-stream-id", "replication-channel", "recording-events-channel",
                    "recording-events-stream-id", "segment-length", "threading", "archive-id", "record-checksum",
                    "credentials", "challenge"),
                    with(SERVER_FLAGS, "external-driver", "delete-archive-on-start")));
                case "driver" -> ServerCommands.driver(Options.parse(
                    command, args, Set.of("aeron-dir", "threading"), SERVER_FLAGS));
                case "connect" -> ClientCommands.connect(client(command, args));
                case "record" -> ClientCommands.record(client(command, args, Set.of("fragmented", "signals"),
                    "channel", "stream-id", "messages", "size", "first-index", "source-location"));
                case "start-recording" -> ClientCommands.startRecording(client(command, args, Set.of(),
                    "channel", "stream-id", "source-location"));
                case "stop-recording" -> ClientCommands.stopRecording(client(command, args, Set.of(),
                    "channel", "stream-id", "subscription-id", "recording-id", "await-position"));
                case "list" -> ClientCommands.list(client(command, args, Set.of(),
                    "recording-id", "from-recording-id", "count"));
                case "replay" -> ClientCommands.replay(client(command, args, Set.of(),
                    "recording-id", "position", "length", "replay-channel", "replay-stream-id",
                    "limit-counter-id", "limit-position"));
                case "publish" -> ClientCommands.publish(Options.parse(command, args, Set.of(
                    "aeron-dir", "timeout-ms", "channel", "stream-id", "messages", "size", "first-index", "linger-ms"),
                    Set.of("embedded-driver", "fragmented")));
                case "truncate" -> MaintenanceCommands.truncate(client(command, args, Set.of(),
                    "recording-id", "position"));
                case "purge" -> MaintenanceCommands.purge(client(command, args, Set.of(), "recording-id"));
                case "extend" -> MaintenanceCommands.extend(client(command, args, Set.of("auto-stop"),
                    "recording-id", "channel", "stream-id", "messages", "size", "first-index", "source-location"));
                case "positions" -> MaintenanceCommands.positions(client(command, args, Set.of(), "recording-id"));
                case "segments" -> MaintenanceCommands.segments(client(command, args, Set.of(),
                    "op", "recording-id", "new-start-position", "dst-recording-id"));
                case "update-channel" -> UpdateChannelCommand.run(client(command, args, Set.of(),
                    "recording-id", "channel", "active-channel", "stream-id", "messages", "size",
                    "source-location"));
                case "replay-merge" -> ReplayMergeCommand.run(client(command, args, Set.of(),
                    "recording-id", "live-channel", "live-stream-id", "messages", "live-messages", "size",
                    "position", "replay-channel", "replay-endpoint", "live-endpoint", "recording-endpoint"));
                case "persistent-subscription" -> PersistentSubscriptionCommand.run(client(command, args, Set.of(),
                    "live-channel", "live-stream-id", "messages", "live-messages", "after-live-messages", "size",
                    "position", "replay-channel", "replay-stream-id", "live-endpoint", "recording-endpoint"));
                case "replicate" -> ReplicateCommand.run(client(command, args, Set.of(),
                    "src-recording-id", "src-control-channel", "src-control-stream-id", "dst-recording-id",
                    "stop-position", "replication-channel", "src-response-channel", "replication-session-id",
                    "await"));
                case "scripted-session" -> ScriptedSession.run(client(command, args, Set.of("with-unanswered"), "channel", "channel-b",
                    "stream-id", "messages", "size", "replay-channel", "replay-stream-id", "session-id"));
                case "help", "--help" -> usage(null);
                default -> usage("unknown subcommand '" + command + "'");
            };
        }
        catch (final UsageException ex)
        {
            return fail(command, "usage", ex, EXIT_USAGE);
        }
        catch (final PeerTimeoutException ex)
        {
            return fail(command, "timeout", ex, EXIT_TIMEOUT);
        }
        catch (final Throwable ex)
        {
            ex.printStackTrace(System.err);
            return fail(command, "failed", ex, EXIT_FAILED);
        }
    }

    private static Options client(final String command, final String[] args)
    {
        return Options.parse(command, args, CONNECTION, CONNECTION_FLAGS);
    }

    private static Options client(
        final String command, final String[] args, final Set<String> extraFlags, final String... extraValued)
    {
        final Set<String> flags = new TreeSet<>(CONNECTION_FLAGS);
        flags.addAll(extraFlags);
        return Options.parse(command, args, with(CONNECTION, extraValued), flags);
    }

    private static Set<String> with(final Set<String> base, final String... more)
    {
        final Set<String> all = new TreeSet<>(base);
        all.addAll(Set.of(more));
        return all;
    }

    private static int fail(final String command, final String kind, final Throwable ex, final int exitCode)
    {
        Json.event("error")
            .put("command", command)
            .put("kind", kind)
            .put("exception", ex.getClass().getName())
            .put("message", String.valueOf(ex.getMessage()))
            .emit();
        System.err.println("[modern-peer] " + command + ": " + ex);
        return exitCode;
    }

    private static int usage(final String problem)
    {
        if (problem != null)
        {
            System.err.println("modern-peer: " + problem);
            Json.event("error").put("command", "").put("kind", "usage").put("exception", "")
                .put("message", problem).emit();
        }
        System.err.println("usage: modern-peer SUBCOMMAND [--option value]...");
        System.err.println("subcommands: " + SUBCOMMANDS + " (see docs/interop.md)");
        return problem == null ? EXIT_OK : EXIT_USAGE;
    }
}
