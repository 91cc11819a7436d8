package ratebound.oracle;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.EnumSet;

import com.fasterxml.jackson.core.JsonProcessingException;
import jakarta.servlet.DispatcherType;
import jakarta.servlet.FilterRegistration;
import jakarta.servlet.ServletRegistration;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import org.apache.catalina.Context;
import org.apache.catalina.connector.Connector;
import org.apache.catalina.startup.Tomcat;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.security.authentication.AuthenticationManager;
import org.springframework.security.authentication.BadCredentialsException;
import org.springframework.security.authentication.UsernamePasswordAuthenticationToken;
import org.springframework.security.config.annotation.web.builders.HttpSecurity;
import org.springframework.security.config.annotation.web.configuration.EnableWebSecurity;
import org.springframework.security.config.annotation.web.configurers.AbstractHttpConfigurer;
import org.springframework.security.core.AuthenticationException;
import org.springframework.security.web.SecurityFilterChain;
import org.springframework.security.web.firewall.RequestRejectedHandler;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.support.AnnotationConfigWebApplicationContext;
import org.springframework.web.filter.CharacterEncodingFilter;
import org.springframework.web.filter.DelegatingFilterProxy;
import org.springframework.web.servlet.DispatcherServlet;
import org.springframework.web.servlet.config.annotation.EnableWebMvc;

/**
 * Oracle reader: which account name do Spring Security / Spring MVC / Jackson on
 * embedded Tomcat read from a sign-in request?
 *
 * <p>Every endpoint runs the framework's own code up to the point where an application
 * would look the account up: the {@link AuthenticationManager}. That manager records
 * {@code auth.getName()} and throws {@link Recorded} (a BadCredentialsException), and the
 * answer is {@code {"account": "<name>"}}, or {@code {"account": null, "why": "..."}} when
 * authentication was never reached. JSON answers are ASCII-only: every char outside
 * U+0020..U+007E is written as a \\uXXXX escape of its UTF-16 code unit.
 *
 * <p>The servlet stack is assembled as Spring Boot 3.5 assembles it by default: Tomcat's
 * HTTP/1.1 connector, a forced UTF-8 CharacterEncodingFilter ahead of the
 * springSecurityFilterChain, a DispatcherServlet on "/" whose Jackson converter comes from
 * Jackson2ObjectMapperBuilder (FAIL_ON_UNKNOWN_PROPERTIES off).
 */
public final class SpringReader {

    private SpringReader() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: SpringReader PORT");
            System.exit(2);
        }
        int port = Integer.parseInt(args[0]);

        Tomcat tomcat = new Tomcat();
        tomcat.setBaseDir(Files.createTempDirectory("spring-reader-").toString());
        Connector connector = new Connector("HTTP/1.1");
        connector.setPort(port);
        connector.setProperty("address", "127.0.0.1");
        tomcat.getService().addConnector(connector);
        tomcat.setConnector(connector);

        Context ctx = tomcat.addContext("", null);
        ctx.addServletContainerInitializer((classes, sc) -> {
            AnnotationConfigWebApplicationContext app = new AnnotationConfigWebApplicationContext();
            app.register(ReaderConfig.class, Endpoints.class);
            app.setServletContext(sc);
            app.refresh();
            EnumSet<DispatcherType> all = EnumSet.of(DispatcherType.REQUEST, DispatcherType.ERROR,
                    DispatcherType.ASYNC);
            // Spring Boot's default: server.servlet.encoding.charset=UTF-8, forced for requests.
            FilterRegistration.Dynamic enc = sc.addFilter("characterEncodingFilter",
                    new CharacterEncodingFilter("UTF-8", true, false));
            enc.addMappingForUrlPatterns(all, true, "/*");
            FilterRegistration.Dynamic sec = sc.addFilter("springSecurityFilterChain",
                    new DelegatingFilterProxy("springSecurityFilterChain", app));
            sec.addMappingForUrlPatterns(all, true, "/*");
            ServletRegistration.Dynamic ds = sc.addServlet("dispatcher", new DispatcherServlet(app));
            ds.setLoadOnStartup(1);
            ds.addMapping("/");
        }, null);

        tomcat.start();
        System.out.println("ready");
        System.out.flush();
        tomcat.getServer().await();
    }

    /** What the AuthenticationManager throws after recording the name it was given. */
    public static final class Recorded extends BadCredentialsException {
        private static final long serialVersionUID = 1L;
        final String name;

        Recorded(String name) {
            super("recorded");
            this.name = name;
        }
    }

    @Configuration
    @EnableWebSecurity
    @EnableWebMvc
    public static class ReaderConfig {

        @Bean
        public AuthenticationManager authenticationManager() {
            return auth -> {
                throw new Recorded(auth.getName());
            };
        }

        @Bean
        public SecurityFilterChain filterChain(HttpSecurity http, AuthenticationManager am) throws Exception {
            http.authenticationManager(am)
                .csrf(AbstractHttpConfigurer::disable)
                .requestCache(AbstractHttpConfigurer::disable)
                .authorizeHttpRequests(a -> a.anyRequest().permitAll())
                // Spring Security's own UsernamePasswordAuthenticationFilter on POST /up/form-login.
                .formLogin(f -> f.loginProcessingUrl("/up/form-login")
                    .failureHandler((req, resp, ex) -> answerFailure(resp, ex))
                    .successHandler((req, resp, auth) -> Json.write(resp, 500, null,
                        "authentication unexpectedly succeeded"))
                    .permitAll());
            return http.build();
        }

        /** Firewall rejections (StrictHttpFirewall) answer JSON instead of a bare 400. */
        @Bean
        public RequestRejectedHandler requestRejectedHandler() {
            return (req, resp, ex) -> Json.write(resp, 400, null, Json.why(ex));
        }

        static void answerFailure(HttpServletResponse resp, AuthenticationException ex) throws IOException {
            if (ex instanceof Recorded r) {
                Json.write(resp, 200, r.name, null);
            } else {
                Json.write(resp, 401, null, Json.why(ex));
            }
        }
    }

    /** The JSON sign-in body, read by Spring MVC's Jackson converter (@RequestBody). */
    public static class LoginRequest {
        public String username;
        public String password;
    }

    @RestController
    public static class Endpoints {
        private final AuthenticationManager am;

        public Endpoints(AuthenticationManager am) {
            this.am = am;
        }

        /** JSON sign-in, handled as UsernamePasswordAuthenticationFilter handles its fields. */
        @PostMapping("/up/login")
        public void login(@RequestBody LoginRequest body, HttpServletResponse resp) throws IOException {
            String username = body.username;
            username = (username != null) ? username.trim() : "";
            String password = body.password;
            password = (password != null) ? password : "";
            authenticate(username, password, resp);
        }

        /** Account named by header x-login: request.getHeader (firewalled by Spring Security), trim. */
        @PostMapping("/up/hdr-login")
        public void headerLogin(HttpServletRequest req, HttpServletResponse resp) throws IOException {
            String username = req.getHeader("x-login");
            if (username == null) {
                Json.write(resp, 400, null, "no x-login header");
                return;
            }
            authenticate(username.trim(), "", resp);
        }

        private void authenticate(String username, String password, HttpServletResponse resp) throws IOException {
            try {
                am.authenticate(UsernamePasswordAuthenticationToken.unauthenticated(username, password));
                Json.write(resp, 500, null, "authentication unexpectedly succeeded");
            } catch (AuthenticationException ex) {
                ReaderConfig.answerFailure(resp, ex);
            }
        }

        /** Anything the framework refused before authentication (415, unreadable body, firewall). */
        @ExceptionHandler(Exception.class)
        public void refused(Exception ex, HttpServletResponse resp) throws IOException {
            Json.write(resp, 400, null, Json.why(ex));
        }
    }

    static final class Json {
        private Json() {
        }

        static String why(Throwable ex) {
            Throwable t = ex;
            while (t.getCause() != null && t.getCause() != t && t.getCause() instanceof JsonProcessingException) {
                t = t.getCause();
            }
            String msg = (t instanceof JsonProcessingException j) ? j.getOriginalMessage() : t.getMessage();
            if (msg == null) {
                msg = "";
            }
            int nl = msg.indexOf('\n');
            if (nl >= 0) {
                msg = msg.substring(0, nl);
            }
            if (msg.length() > 200) {
                msg = msg.substring(0, 200);
            }
            return ex.getClass().getSimpleName() + ": " + msg;
        }

        static void write(HttpServletResponse resp, int status, String account, String why) throws IOException {
            StringBuilder sb = new StringBuilder("{\"account\": ");
            if (account == null) {
                sb.append("null");
            } else {
                quote(sb, account);
            }
            if (why != null) {
                sb.append(", \"why\": ");
                quote(sb, why);
            }
            sb.append("}\n");
            byte[] bytes = sb.toString().getBytes(StandardCharsets.US_ASCII);
            resp.setStatus(status);
            resp.setContentType("application/json");
            resp.setContentLength(bytes.length);
            resp.getOutputStream().write(bytes);
            resp.flushBuffer();
        }

        /** JSON string with every char outside U+0020..U+007E as \\uXXXX (UTF-16 code units). */
        static void quote(StringBuilder sb, String s) {
            sb.append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                if (c == '"' || c == '\\') {
                    sb.append('\\').append(c);
                } else if (c < 0x20 || c > 0x7e) {
                    sb.append(String.format("\\u%04x", (int) c));
                } else {
                    sb.append(c);
                }
            }
            sb.append('"');
        }
    }
}
