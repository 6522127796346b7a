package dev.kvflux.examples.webflux;

import jakarta.validation.Valid;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Mono;

/** {@code POST /transfers}: runs one simulated transfer and answers its {@link TransferResult}. */
@RestController
public class TransferController {
    private final TransferService transfers;

    public TransferController(TransferService transfers) {
        this.transfers = transfers;
    }

    /** 200 with {@code write_done} or {@code write_failed}; 400 for a body that fails validation. */
    @PostMapping("/transfers")
    public Mono<TransferResult> transfer(@Valid @RequestBody TransferRequest request) {
        return transfers.run(request);
    }
}
