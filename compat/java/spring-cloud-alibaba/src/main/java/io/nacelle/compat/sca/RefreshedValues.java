package io.nacelle.compat.sca;

import org.springframework.beans.factory.annotation.Value;
import org.springframework.cloud.context.config.annotation.RefreshScope;
import org.springframework.stereotype.Component;

/** The same four values through {@code @Value} in a {@code @RefreshScope} bean. */
@Component
@RefreshScope
public class RefreshedValues {

    @Value("${demo.greeting:unset}")
    private String greeting;
    @Value("${demo.shared:unset}")
    private String shared;
    @Value("${demo.overridden:unset}")
    private String overridden;
    @Value("${demo.late:unset}")
    private String late;

    public String getGreeting() { return greeting; }
    public String getShared() { return shared; }
    public String getOverridden() { return overridden; }
    public String getLate() { return late; }
}
