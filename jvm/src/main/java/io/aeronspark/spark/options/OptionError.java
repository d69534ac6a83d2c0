package io.aeronspark.spark.options;

/** A bad option: the message names the option and what it accepts (the Python connector's wording). */
public final class OptionError extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;

    public OptionError(final String message) {
        super(message);
    }
}
