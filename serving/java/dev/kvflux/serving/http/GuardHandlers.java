package dev.kvflux.serving.http;

import io.netty.channel.ChannelDuplexHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelPromise;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.LastHttpContent;
import java.util.concurrent.TimeUnit;

/** The two channel handlers through which a {@link ConnectionGuard} follows one connection's state. */
final class GuardHandlers {
    private GuardHandlers() {
    }

    /** Before the HTTP codec: sees every read, so that the first byte of a request starts its head's deadline. */
    static final class Bytes extends ChannelInboundHandlerAdapter {
        private final ConnectionGuard.Conn conn;

        Bytes(ConnectionGuard.Conn conn) {
            this.conn = conn;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            if (conn.dropping) {
                io.netty.util.ReferenceCountUtil.release(msg);
                return;
            }
            conn.guard().bytesArrived(conn);
            ctx.fireChannelRead(msg);
        }

        @Override
        public void channelWritabilityChanged(ChannelHandlerContext ctx) {
            conn.guard().writability(conn, ctx.channel().isWritable());
            ctx.fireChannelWritabilityChanged();
        }
    }

    /** After the HTTP codec: a request's head ends its header deadline; its answer's end makes the connection idle. */
    static final class Messages extends ChannelDuplexHandler {
        private final ConnectionGuard.Conn conn;

        Messages(ConnectionGuard.Conn conn) {
            this.conn = conn;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            if (msg instanceof HttpRequest) {
                conn.guard().headReceived(conn);
            }
            ctx.fireChannelRead(msg);
        }

        @Override
        public void close(ChannelHandlerContext ctx, ChannelPromise promise) {
            if (!conn.linger || conn.closing || !(ctx.channel() instanceof io.netty.channel.socket.DuplexChannel duplex)
                    || !ctx.channel().isActive()) {
                ctx.close(promise);
                return;
            }
            // a lingering close: the answer goes out whole, then what the client still sends is read and dropped
            conn.closing = true;
            conn.dropping = true;
            ctx.flush();
            duplex.shutdownOutput();
            ctx.channel().config().setAutoRead(true);
            ctx.executor().schedule(() -> {
                ctx.close(promise);
            }, ConnectionGuard.LINGER_MILLIS, TimeUnit.MILLISECONDS);
        }

        @Override
        public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) {
            if (msg instanceof LastHttpContent) {
                ChannelPromise written = promise.unvoid();
                written.addListener(done -> {
                    if (done.isSuccess()) {
                        conn.guard().answered(conn);
                    }
                });
                ctx.write(msg, written);
                return;
            }
            ctx.write(msg, promise);
        }
    }
}
