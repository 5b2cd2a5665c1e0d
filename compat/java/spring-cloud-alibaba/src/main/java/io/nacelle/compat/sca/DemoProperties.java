package io.nacelle.compat.sca;

import org.springframework.boot.context.properties.ConfigurationProperties;

/**
 * Bound from {@code demo.*}; Spring Cloud rebinds it when the environment changes
 * (a JavaBean, so it can be rebound in place).
 */
@ConfigurationProperties(prefix = "demo")
public class DemoProperties {

    /** From app.yaml. */
    private String greeting = "unset";
    /** From shared.yaml. */
    private String shared = "unset";
    /** In both; app.yaml wins while it has it. */
    private String overridden = "unset";
    /** From late.yaml, a config that does not exist when the app starts. */
    private String late = "unset";

    public String getGreeting() { return greeting; }
    public void setGreeting(String greeting) { this.greeting = greeting; }
    public String getShared() { return shared; }
    public void setShared(String shared) { this.shared = shared; }
    public String getOverridden() { return overridden; }
    public void setOverridden(String overridden) { this.overridden = overridden; }
    public String getLate() { return late; }
    public void setLate(String late) { this.late = late; }
}
