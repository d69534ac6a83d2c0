package io.aeronspark.interop;

import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

/**
 * "--name value" and "--flag" options of one subcommand. Each subcommand names the options it
 * accepts, so a typo is reported instead of silently ignored.
 */
final class Options
{
    private final String command;
    private final Map<String, String> values = new HashMap<>();
    private final Set<String> flags = new HashSet<>();

    private Options(final String command)
    {
        this.command = command;
    }

    static Options parse(
        final String command, final String[] args, final int from, final Set<String> valued, final Set<String> flagged)
    {
        final Options options = new Options(command);
        for (int i = from; i < args.length; i++)
        {
            final String arg = args[i];
            if (!arg.startsWith("--"))
            {
                throw new UsageException(command + ": unexpected argument '" + arg + "'");
            }
            final String name = arg.substring(2);
            if (flagged.contains(name))
            {
                options.flags.add(name);
            }
            else if (valued.contains(name))
            {
                if (i + 1 >= args.length)
                {
                    throw new UsageException(command + ": option --" + name + " needs a value");
                }
                options.values.put(name, args[++i]);
            }
            else
            {
                final Set<String> accepted = new HashSet<>(valued);
                accepted.addAll(flagged);
                throw new UsageException(
                    command + ": unknown option --" + name + "; accepted: --" + String.join(", --", new java.util.TreeSet<>(accepted)));
            }
        }
        return options;
    }

    boolean flag(final String name)
    {
        return flags.contains(name);
    }

    boolean has(final String name)
    {
        return values.containsKey(name);
    }

    String string(final String name, final String defaultValue)
    {
        return values.getOrDefault(name, defaultValue);
    }

    String requiredString(final String name)
    {
        final String value = values.get(name);
        if (value == null)
        {
            throw new UsageException(command + ": option --" + name + " is required");
        }
        return value;
    }

    long longValue(final String name, final long defaultValue)
    {
        final String value = values.get(name);
        return value == null ? defaultValue : parseLong(name, value);
    }

    long requiredLong(final String name)
    {
        return parseLong(name, requiredString(name));
    }

    int intValue(final String name, final int defaultValue)
    {
        return Math.toIntExact(longValue(name, defaultValue));
    }

    int requiredInt(final String name)
    {
        return Math.toIntExact(requiredLong(name));
    }

    private long parseLong(final String name, final String value)
    {
        try
        {
            return Long.parseLong(value);
        }
        catch (final NumberFormatException ex)
        {
            throw new UsageException(command + ": option --" + name + " needs an integer, got '" + value + "'");
        }
    }
}
