package io.aeronspark.spark.options;

import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * The one option spec (connector/option_specs.json, copied into the jar at
 * {@value #RESOURCE}): canonical names (case-insensitive, with "Did you mean"), typed parsers per
 * spec type with the Python connector's error wording, and the defaults. Python's
 * connector/options.py is the other reader of the same file.
 */
public final class OptionSpecs {
    public static final String RESOURCE = "/aeron_spark/option_specs.json";
    public static final String SIDE_SOURCE = "jvm-source";
    public static final String SIDE_SINK = "jvm-sink";
    /** Options Spark itself adds to a source's or sink's options (never the user's). */
    private static final List<String> SPARK_SUPPLIED = List.of("queryname", "path", "checkpointlocation");

    /** One entry of the spec. */
    public static final class Spec {
        public final String name;
        public final List<String> sides;
        public final List<String> modes;
        public final String type;
        public final Long min;
        public final Long max;
        public final List<String> choices;
        public final JsonNode defaultValue;
        public final String accepted;

        Spec(final JsonNode node) {
            name = node.get("name").asText();
            sides = texts(node.get("sides"));
            modes = texts(node.get("modes"));
            type = node.get("type").asText();
            min = node.hasNonNull("min") ? node.get("min").asLong() : null;
            max = node.hasNonNull("max") ? node.get("max").asLong() : null;
            choices = node.hasNonNull("choices") ? texts(node.get("choices")) : null;
            defaultValue = node.hasNonNull("default") ? node.get("default") : null;
            accepted = node.get("accepted").asText();
        }

        private static List<String> texts(final JsonNode array) {
            final List<String> out = new ArrayList<>();
            if (array != null) {
                array.forEach(item -> out.add(item.asText()));
            }
            return Collections.unmodifiableList(out);
        }

        public OptionError invalid(final String value) {
            return new OptionError("option " + name + "=" + pythonRepr(value) + " is not valid; accepted: " + accepted);
        }
    }

    private static volatile List<Spec> loaded;
    private static final Map<String, OptionSpecs> BY_SIDE = new LinkedHashMap<>();

    /** Every entry, in the spec's order (one name may have an entry per side, e.g. channel). */
    private final List<Spec> all;
    /** The entries of this instance's side by lower-case name (of every side: the first entry of a name). */
    private final Map<String, Spec> byLowerName = new LinkedHashMap<>();

    private OptionSpecs(final List<Spec> all, final String side) {
        this.all = all;
        for (Spec spec : all) {
            if (side == null || spec.sides.contains(side)) {
                byLowerName.putIfAbsent(spec.name.toLowerCase(Locale.ROOT), spec);
            }
        }
    }

    /** The options of one side ({@link #SIDE_SOURCE}, {@link #SIDE_SINK}): their typed values and defaults. */
    public static synchronized OptionSpecs get(final String side) {
        return BY_SIDE.computeIfAbsent(side, s -> new OptionSpecs(entries(), s));
    }

    /**
     * Every side's options. A name several sides define (channel, streamId) resolves to its first
     * entry here: use {@link #get(String)} for typed values.
     */
    public static synchronized OptionSpecs get() {
        return BY_SIDE.computeIfAbsent("", s -> new OptionSpecs(entries(), null));
    }

    private static List<Spec> entries() {
        List<Spec> specs = loaded;
        if (specs == null) {
            specs = load();
            loaded = specs;
        }
        return specs;
    }

    private static List<Spec> load() {
        try (InputStream in = OptionSpecs.class.getResourceAsStream(RESOURCE)) {
            if (in == null) {
                throw new IllegalStateException("the option spec " + RESOURCE + " is missing from the jar "
                    + "(tools/build-jvm copies connector/option_specs.json into it)");
            }
            final List<Spec> specs = new ArrayList<>();
            for (JsonNode node : new ObjectMapper().readTree(in).get("options")) {
                specs.add(new Spec(node));
            }
            return Collections.unmodifiableList(specs);
        } catch (IOException error) {
            throw new IllegalStateException("cannot read the option spec " + RESOURCE + ": " + error, error);
        }
    }

    private Spec entryFor(final String lowerName, final String side) {
        for (Spec spec : all) {
            if (spec.sides.contains(side) && spec.name.toLowerCase(Locale.ROOT).equals(lowerName)) {
                return spec;
            }
        }
        return null;
    }

    public Spec spec(final String name) {
        final Spec spec = byLowerName.get(name.toLowerCase(Locale.ROOT));
        if (spec == null) {
            throw new IllegalArgumentException("no option " + name + " in the spec");
        }
        return spec;
    }

    /** The names a side accepts, in the spec's order. */
    public List<String> namesFor(final String side) {
        final List<String> names = new ArrayList<>();
        for (Spec spec : all) {
            if (spec.sides.contains(side)) {
                names.add(spec.name);
            }
        }
        return names;
    }

    /**
     * The options under their canonical names (values trimmed), Spark's own options left out; an
     * option the side does not accept fails, naming the closest accepted names.
     */
    public Map<String, String> canonical(final Map<String, String> given, final String side, final String format) {
        final Map<String, String> out = new TreeMap<>();
        for (Map.Entry<String, String> entry : given.entrySet()) {
            final String key = entry.getKey();
            final String lower = key.toLowerCase(Locale.ROOT);
            if (SPARK_SUPPLIED.contains(lower)) {
                continue;
            }
            final Spec spec = entryFor(lower, side);
            if (spec == null) {
                throw new OptionError(unknownMessage(key, side, format));
            }
            if (entry.getValue() != null) {
                out.put(spec.name, entry.getValue().trim());
            }
        }
        return out;
    }

    private String unknownMessage(final String key, final String side, final String format) {
        final List<String> names = namesFor(side);
        final List<String> close = closeMatches(key.toLowerCase(Locale.ROOT), names);
        final StringBuilder message = new StringBuilder("unknown option ").append(pythonRepr(key))
            .append(" for format ").append(format).append('.');
        if (!close.isEmpty()) {
            message.append(" Did you mean ");
            for (int i = 0; i < close.size(); i++) {
                message.append(i == 0 ? "" : " or ").append(pythonRepr(close.get(i)));
            }
            message.append('?');
        }
        return message.append(" Accepted options: ").append(String.join(", ", names)).toString();
    }

    /** Up to three names whose similarity (difflib's ratio: 2*matches/total) is at least 0.6, best first. */
    static List<String> closeMatches(final String lowerKey, final List<String> names) {
        final List<double[]> scored = new ArrayList<>();
        for (int i = 0; i < names.size(); i++) {
            final String lowerName = names.get(i).toLowerCase(Locale.ROOT);
            final double ratio = 2.0 * commonSubsequence(lowerKey, lowerName) / (lowerKey.length() + lowerName.length());
            if (ratio >= 0.6) {
                scored.add(new double[] {ratio, i});
            }
        }
        scored.sort((a, b) -> Double.compare(b[0], a[0]));
        final List<String> out = new ArrayList<>();
        for (int i = 0; i < Math.min(3, scored.size()); i++) {
            out.add(names.get((int) scored.get(i)[1]));
        }
        return out;
    }

    private static int commonSubsequence(final String a, final String b) {
        final int[][] table = new int[a.length() + 1][b.length() + 1];
        for (int i = 1; i <= a.length(); i++) {
            for (int j = 1; j <= b.length(); j++) {
                table[i][j] = a.charAt(i - 1) == b.charAt(j - 1) ? table[i - 1][j - 1] + 1
                    : Math.max(table[i - 1][j], table[i][j - 1]);
            }
        }
        return table[a.length()][b.length()];
    }

    /** Python's repr of a str, as the Python connector's messages show values. */
    public static String pythonRepr(final String value) {
        final boolean doubleQuoted = value.indexOf('\'') >= 0 && value.indexOf('"') < 0;
        final char quote = doubleQuoted ? '"' : '\'';
        final StringBuilder out = new StringBuilder().append(quote);
        for (char c : value.toCharArray()) {
            if (c == '\\' || c == quote) {
                out.append('\\').append(c);
            } else if (c == '\n') {
                out.append("\\n");
            } else if (c == '\t') {
                out.append("\\t");
            } else {
                out.append(c);
            }
        }
        return out.append(quote).toString();
    }

    // --- typed values ------------------------------------------------------------------------

    public String string(final Map<String, String> options, final String name) {
        final String value = options.get(spec(name).name);
        if (value != null) {
            return value;
        }
        final Spec spec = spec(name);
        return spec.defaultValue == null ? null : spec.defaultValue.asText();
    }

    /** A channel option: an aeron:udp or aeron:ipc URI (null when unset and without a default). */
    public String channel(final Map<String, String> options, final String name) {
        final String value = string(options, name);
        if (value != null && !(value.startsWith("aeron:udp") || value.startsWith("aeron:ipc"))) {
            throw new OptionError("option " + spec(name).name + "=" + pythonRepr(value)
                + " is not an Aeron channel; accepted: aeron:udp?... | aeron:ipc?...");
        }
        return value;
    }

    public boolean bool(final Map<String, String> options, final String name) {
        final Spec spec = spec(name);
        final String value = options.get(spec.name);
        if (value == null) {
            return spec.defaultValue != null && spec.defaultValue.asBoolean();
        }
        if (value.equalsIgnoreCase("true")) {
            return true;
        }
        if (value.equalsIgnoreCase("false")) {
            return false;
        }
        throw spec.invalid(value);
    }

    /** An int/long option within the spec's bounds; null when unset and without a default. */
    public Long number(final Map<String, String> options, final String name) {
        final Spec spec = spec(name);
        final String value = options.get(spec.name);
        if (value == null) {
            return spec.defaultValue == null ? null : spec.defaultValue.asLong();
        }
        final long parsed;
        try {
            parsed = Long.parseLong(value);
        } catch (NumberFormatException error) {
            throw spec.invalid(value);
        }
        checkBounds(spec, value, parsed);
        if (spec.type.equals("int") && (parsed < Integer.MIN_VALUE || parsed > Integer.MAX_VALUE)) {
            throw spec.invalid(value);
        }
        return parsed;
    }

    private static final Pattern SIZE = Pattern.compile("(\\d+)\\s*([a-zA-Z]*)");

    /** A size in bytes: a number, or with k, m, g, t (binary units); null when unset and without a default. */
    public Long size(final Map<String, String> options, final String name) {
        final Spec spec = spec(name);
        final String value = options.get(spec.name);
        if (value == null) {
            return spec.defaultValue == null ? null : spec.defaultValue.asLong();
        }
        final Matcher match = SIZE.matcher(value);
        if (!match.matches()) {
            throw spec.invalid(value);
        }
        final long unit;
        switch (match.group(2).toLowerCase(Locale.ROOT)) {
            case "": case "b": unit = 1L; break;
            case "k": case "kb": case "kib": unit = 1L << 10; break;
            case "m": case "mb": case "mib": unit = 1L << 20; break;
            case "g": case "gb": case "gib": unit = 1L << 30; break;
            case "t": case "tb": case "tib": unit = 1L << 40; break;
            default: throw spec.invalid(value);
        }
        final long parsed;
        try {
            parsed = Math.multiplyExact(Long.parseLong(match.group(1)), unit);
        } catch (ArithmeticException | NumberFormatException error) {
            throw spec.invalid(value);
        }
        checkBounds(spec, value, parsed);
        return parsed;
    }

    public String choice(final Map<String, String> options, final String name) {
        final Spec spec = spec(name);
        final String value = options.get(spec.name);
        if (value == null) {
            return spec.defaultValue == null ? null : spec.defaultValue.asText();
        }
        for (String choice : spec.choices) {
            if (choice.equalsIgnoreCase(value)) {
                return choice;
            }
        }
        throw spec.invalid(value);
    }

    /** A comma list or JSON list of int64 (longList) or int32 (intList); null when unset. */
    public long[] numberList(final Map<String, String> options, final String name) {
        final Spec spec = spec(name);
        final String value = options.get(spec.name);
        if (value == null) {
            return null;
        }
        String body = value;
        if (body.startsWith("[") && body.endsWith("]")) {
            body = body.substring(1, body.length() - 1);
        }
        final String[] parts = body.split(",", -1);
        final long[] out = new long[parts.length];
        for (int i = 0; i < parts.length; i++) {
            try {
                out[i] = Long.parseLong(parts[i].trim());
            } catch (NumberFormatException error) {
                throw spec.invalid(value);
            }
            checkBounds(spec, value, out[i]);
            if (spec.type.equals("intList") && (out[i] < Integer.MIN_VALUE || out[i] > Integer.MAX_VALUE)) {
                throw spec.invalid(value);
            }
        }
        if (out.length == 0 || body.isBlank()) {
            throw spec.invalid(value);
        }
        return out;
    }

    /** A regular expression (Java's dialect, which agrees with Python's for common patterns). */
    public Pattern regex(final Map<String, String> options, final String name) {
        final Spec spec = spec(name);
        final String value = options.get(spec.name);
        if (value == null) {
            return null;
        }
        try {
            return Pattern.compile(value);
        } catch (PatternSyntaxException error) {
            throw new OptionError("option " + spec.name + "=" + pythonRepr(value) + " is not valid; accepted: "
                + spec.accepted + " (" + error.getDescription() + ")");
        }
    }

    private static void checkBounds(final Spec spec, final String value, final long parsed) {
        if ((spec.min != null && parsed < spec.min) || (spec.max != null && parsed > spec.max)) {
            throw spec.invalid(value);
        }
    }
}
