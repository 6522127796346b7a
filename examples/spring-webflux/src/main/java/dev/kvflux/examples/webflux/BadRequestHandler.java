package dev.kvflux.examples.webflux;

import java.util.stream.Collectors;
import org.springframework.core.NestedExceptionUtils;
import org.springframework.http.HttpStatus;
import org.springframework.http.ProblemDetail;
import org.springframework.validation.FieldError;
import org.springframework.validation.ObjectError;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.RestControllerAdvice;
import org.springframework.web.bind.support.WebExchangeBindException;
import org.springframework.web.server.ServerWebInputException;
import tools.jackson.core.JacksonException;

/**
 * Answers a body that cannot be read or fails validation with 400 and a problem detail whose
 * {@code detail} says what was wrong, field by field.
 */
@RestControllerAdvice
public class BadRequestHandler {

    @ExceptionHandler
    public ProblemDetail invalid(WebExchangeBindException e) {
        String detail = e.getAllErrors().stream()
                .map(BadRequestHandler::describe)
                .sorted()
                .collect(Collectors.joining("; "));
        return ProblemDetail.forStatusAndDetail(HttpStatus.BAD_REQUEST, detail);
    }

    @ExceptionHandler
    public ProblemDetail unreadable(ServerWebInputException e) {
        Throwable cause = NestedExceptionUtils.getMostSpecificCause(e);
        String detail = cause instanceof JacksonException json ? where(json) + json.getOriginalMessage() : e.getReason();
        return ProblemDetail.forStatusAndDetail(HttpStatus.BAD_REQUEST, "unreadable body: " + detail);
    }

    /** {@code fault.kind: } for the property the parser stopped at, or nothing at the top level. */
    private static String where(JacksonException e) {
        String path = e.getPath().stream()
                .map(reference -> reference.getPropertyName() != null ? reference.getPropertyName()
                        : String.valueOf(reference.getIndex()))
                .collect(Collectors.joining("."));
        return path.isEmpty() ? "" : path + ": ";
    }

    private static String describe(ObjectError error) {
        if (!(error instanceof FieldError field)) {
            return error.getDefaultMessage();
        }
        String got = field.getRejectedValue() != null ? " (got " + field.getRejectedValue() + ")" : "";
        return field.getField() + " " + error.getDefaultMessage() + got;
    }
}
