package io.nacelle.compat.sca;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.context.properties.EnableConfigurationProperties;

/**
 * A plain Spring Cloud Alibaba application: its configuration comes from Nacos through
 * {@code spring.config.import=nacos:…} (application.yaml), nothing Nacelle-specific.
 */
@SpringBootApplication
@EnableConfigurationProperties(DemoProperties.class)
public class ScaCompatApplication {

    public static void main(String[] args) {
        SpringApplication.run(ScaCompatApplication.class, args);
    }
}
