package io.nacelle.compat.sca;

import java.util.LinkedHashMap;
import java.util.Map;

import org.springframework.core.env.Environment;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;

/**
 * GET /values: what each bean holds now, and what the environment resolves, as
 * {@code {"refreshScope":{…},"properties":{…},"environment":{…}}}.
 */
@RestController
public class ValuesController {

    private static final String[] KEYS = {"greeting", "shared", "overridden", "late"};

    private final RefreshedValues refreshed;
    private final DemoProperties properties;
    private final Environment environment;

    public ValuesController(RefreshedValues refreshed, DemoProperties properties, Environment environment) {
        this.refreshed = refreshed;
        this.properties = properties;
        this.environment = environment;
    }

    @GetMapping("/values")
    public Map<String, Map<String, String>> values() {
        Map<String, String> scope = new LinkedHashMap<>();
        scope.put("greeting", refreshed.getGreeting());
        scope.put("shared", refreshed.getShared());
        scope.put("overridden", refreshed.getOverridden());
        scope.put("late", refreshed.getLate());
        Map<String, String> props = new LinkedHashMap<>();
        props.put("greeting", properties.getGreeting());
        props.put("shared", properties.getShared());
        props.put("overridden", properties.getOverridden());
        props.put("late", properties.getLate());
        Map<String, String> env = new LinkedHashMap<>();
        for (String key : KEYS) {
            env.put(key, environment.getProperty("demo." + key, "unset"));
        }
        Map<String, Map<String, String>> all = new LinkedHashMap<>();
        all.put("refreshScope", scope);
        all.put("properties", props);
        all.put("environment", env);
        return all;
    }
}
