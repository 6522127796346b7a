package dev.kvflux.serving.api;

import java.util.Locale;

/** What an instance does in disaggregated serving. */
public enum Role {
    PREFILL,
    DECODE;

    /** The lower-case name used on the wire and on the command line. */
    public String wireName() {
        return name().toLowerCase(Locale.ROOT);
    }

    /**
     * The role with that wire name.
     *
     * @throws IllegalArgumentException naming the accepted values
     */
    public static Role of(String name) {
        for (Role role : values()) {
            if (role.wireName().equals(name)) {
                return role;
            }
        }
        throw new IllegalArgumentException("unknown role '" + name + "'; expected prefill or decode");
    }
}
