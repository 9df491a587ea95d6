// Deliberately broken (for the tests): a syntax error.
module mul8s_syntax(input [7:0] A, input [7:0] B, output [15:0] O);
  assign O = A * ;
endmodule
