// The exact OCP FP4 (E2M1) multiplier: a, b are E2M1 codes (sign, 2 exponent bits, 1 mantissa
// bit; no inf or NaN), y the product's IEEE binary32 bit pattern.  Every E2M1 value times 2 is
// an integer (0, 1, 2, 3, 4, 6, 8, 12), so n = 4ab is an integer below 2^8; y = n / 4 normalised
// by its leading one.  A zero product keeps the sign (a_s XOR b_s), as IEEE.
module fp4_mul_fp32 (input [3:0] a, input [3:0] b, output reg [31:0] y);
  function [3:0] twice;          // 2 * |value| of the magnitude code
    input [2:0] m;
    case (m)
      3'd0: twice = 4'd0;  3'd1: twice = 4'd1;  3'd2: twice = 4'd2;  3'd3: twice = 4'd3;
      3'd4: twice = 4'd4;  3'd5: twice = 4'd6;  3'd6: twice = 4'd8;  default: twice = 4'd12;
    endcase
  endfunction
  reg [7:0] n;
  reg [2:0] lead;
  reg [30:0] t;
  integer i;
  always @* begin
    n = twice(a[2:0]) * twice(b[2:0]);
    lead = 3'd0;
    for (i = 0; i < 8; i = i + 1)
      if (n[i]) lead = i[2:0];
    t = {n, 23'b0} >> lead;       // the leading one at bit 23
    if (n == 8'd0)
      y = {a[3] ^ b[3], 31'b0};
    else
      y = {a[3] ^ b[3], 8'd125 + {5'd0, lead}, t[22:0]};
  end
endmodule
