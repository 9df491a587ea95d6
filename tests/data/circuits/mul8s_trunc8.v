// Written for lutcore's tests, in EvoApproxLib's header style.  The error figures were
// computed from the circuit's own table; the PDK45 figures are MADE UP for the tests
// (no synthesis was run): they only need to be plausible and ordered.
// MAE% = 0.879 %
// MAE = 576
// WCE% = 2.74 %
// WCE = 1793
// WCRE% = 153700.00 %
// EP% = 100.00 %
// MRE% = 107.35 %
// MSE = 386350
// PDK45_PWR = 0.212 mW
// PDK45_AREA = 354.0 um2
// PDK45_DELAY = 1.18 ns
// A signed 8x8 array multiplier at gate level (Baugh-Wooley partial products,
// rows summed by 16-bit ripple-carry adders of full adders), written for the
// tests.  Parameter K drops the partial products of the K lowest columns
// (a truncated multiplier); K = 0 is exact.  Three modules: the top is the
// one nobody instantiates (mul8_array).

module fa(input x, input y, input cin, output s, output cout);
  wire t1, t2, t3;
  xor g1(t1, x, y);
  xor g2(s, t1, cin);
  and g3(t2, x, y);
  and g4(t3, t1, cin);
  or  g5(cout, t2, t3);
endmodule

module add16(input [15:0] x, input [15:0] y, output [15:0] s);
  wire [16:0] c;
  assign c[0] = 1'b0;
  genvar i;
  generate for (i = 0; i < 16; i = i + 1) begin : bit_
    fa f(.x(x[i]), .y(y[i]), .cin(c[i]), .s(s[i]), .cout(c[i + 1]));
  end endgenerate
endmodule

module mul8_array #(parameter K = 8) (input [7:0] a, input [7:0] b, output [15:0] p);
  // rows[16*j +: 16]: partial products a[c-j] & b[j] in column c; sign terms inverted
  wire [16*9-1:0] rows;
  wire [16*9-1:0] acc;
  genvar j, c;
  generate
    for (j = 0; j < 8; j = j + 1) begin : row
      for (c = 0; c < 16; c = c + 1) begin : col
        if (c - j >= 0 && c - j < 8 && c >= K) begin : pp
          if ((c - j == 7) != (j == 7)) begin : neg
            nand g(rows[16*j + c], a[c - j], b[j]);
          end else begin : pos
            and g(rows[16*j + c], a[c - j], b[j]);
          end
        end else begin : zero
          assign rows[16*j + c] = 1'b0;
        end
      end
    end
  endgenerate
  assign rows[16*8 +: 16] = 16'h8100;          // Baugh-Wooley's constants 2^15 + 2^8
  assign acc[15:0] = rows[15:0];
  generate for (j = 1; j < 9; j = j + 1) begin : sum
    add16 s(.x(acc[16*(j-1) +: 16]), .y(rows[16*j +: 16]), .s(acc[16*j +: 16]));
  end endgenerate
  assign p = acc[16*8 +: 16];
endmodule

// The top: the array with its 8 lowest partial-product columns dropped.
module mul8s_trunc8(input [7:0] A, input [7:0] B, output [15:0] O);
  mul8_array #(.K(8)) m(.a(A), .b(B), .p(O));
endmodule
