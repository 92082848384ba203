/* console (not in `all`): an interactive check of the serial path for
 * `make run` on hosts that cannot boot a stock kernel. COM1 input is
 * polled at CPL3 (LSR.DR), echoed as typed, and each line is printed back;
 * the line "quit" ends the VM through debug-exit with value 0. */
#include "../lib/io.h"
#include "../lib/printf.h"
#include "../lib/report.h"
#include "../lib/serial.h"
#include "../lib/string.h"
#include "../lib/test.h"

#define UART_LSR_DR 0x01
#define LINE_MAX 128

static int getc_polled(void)
{
	while (!(inb(COM1_BASE + UART_LSR) & UART_LSR_DR))
		cpu_relax();
	return inb(COM1_BASE + UART_RBR);
}

static void run(void)
{
	char line[LINE_MAX + 1];
	size_t n = 0;
	unsigned long lines = 0;
	int prev = 0;

	puts("govm test kernel console: type a line, it is echoed; 'quit' exits\n> ");
	for (;;) {
		int c = getc_polled();

		if (c == '\n' && prev == '\r') {
			prev = c;
			continue; /* CR LF: one line end */
		}
		prev = c;
		if (c == '\r' || c == '\n') {
			line[n] = '\0';
			puts("\r\n");
			lines++;
			if (strcmp(line, "quit") == 0)
				break;
			printf("echo: %s\r\n> ", line);
			n = 0;
		} else if (c == 0x7f || c == 0x08) {
			if (n) {
				n--;
				puts("\b \b");
			}
		} else if (c >= 0x20 && c < 0x7f && n < LINE_MAX) {
			line[n++] = (char)c;
			serial_putc((char)c);
		}
	}
	report("console", true, "lines=%lu", lines);
	summary_and_exit();
}

DEFINE_TEST(console, .name = "console", .run = run);
