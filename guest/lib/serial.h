/* Polled 8250/16550 UART on COM1 (0x3f8, IRQ 4). */
#ifndef LIB_SERIAL_H
#define LIB_SERIAL_H

#include <stddef.h>
#include <stdint.h>

#define COM1_BASE 0x3f8
#define COM1_IRQ 4

/* Register offsets from the base port (16550 data sheet). */
#define UART_THR 0 /* transmit holding (write, DLAB=0) */
#define UART_RBR 0 /* receive buffer (read, DLAB=0) */
#define UART_DLL 0 /* divisor latch low (DLAB=1) */
#define UART_IER 1 /* interrupt enable (DLAB=0) */
#define UART_DLM 1 /* divisor latch high (DLAB=1) */
#define UART_IIR 2 /* interrupt identification (read) */
#define UART_FCR 2 /* FIFO control (write) */
#define UART_LCR 3 /* line control */
#define UART_MCR 4 /* modem control */
#define UART_LSR 5 /* line status */

#define UART_IER_THRI 0x02  /* interrupt when THR empty */
#define UART_IIR_NO_INT 0x01
#define UART_LSR_THRE 0x20
#define UART_MCR_OUT2 0x08  /* gates the IRQ line on PC hardware */

/* serial_init programs 115200 8N1 with the FIFO on and interrupts off. */
void serial_init(void);
void serial_putc(char c);
void serial_write(const char *s, size_t n);
/* serial_has_fifo says whether FCR enabled a 16-byte FIFO (IIR bits 6-7). */
int serial_has_fifo(void);

#endif
